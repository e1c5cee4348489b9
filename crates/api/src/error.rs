//! Errors as `application/problem+json` (RFC 9457).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::borrow::Cow;

/// An API error. 4xx carry a stable machine-readable `code` and a `detail` for a person; 5xx are
/// opaque to the client and logged with their cause.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code, e.g. `invalid_field`, `not_found`.
    pub code: &'static str,
    /// What is wrong, for a person.
    pub detail: String,
    /// The offending field, for validation errors: a name (`url`) or, inside a list, a path
    /// (`deliveries[3].event_type`).
    pub field: Option<Cow<'static, str>>,
    /// The quota a `quota_exceeded` refusal is about (`channels`, `active_keys`,
    /// `deliveries_per_second`, `deliveries_per_day`).
    pub quota: Option<&'static str>,
    /// Extra headers (e.g. `Retry-After`).
    pub headers: Vec<(header::HeaderName, String)>,
    /// With `schema_violation`: the failing parts of the value, by JSON pointer (boxed: most
    /// errors have none, and every `Result<_, ApiError>` carries its size).
    pub violations: Option<Box<Vec<breakwater_core::event_types::Violation>>>,
}

/// The body of every error: an RFC 9457 problem, `application/problem+json`.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct Problem<'a> {
    /// `urn:breakwater:problem:<code>`.
    #[serde(rename = "type")]
    #[schema(example = "urn:breakwater:problem:not_found")]
    kind: String,
    /// The HTTP status's reason phrase.
    #[schema(example = "Not Found")]
    title: &'a str,
    /// The HTTP status.
    #[schema(example = 404)]
    status: u16,
    /// What is wrong, for a person. Never a secret, never an internal address.
    #[schema(example = "channel not found")]
    detail: &'a str,
    /// Stable, machine-readable: `bad_request`, `malformed_json`, `invalid_path`,
    /// `invalid_query`, `invalid_body`, `invalid_field`, `invalid_text`, `unauthorized`,
    /// `schema_violation`, `forbidden`, `not_found`, `method_not_allowed`, `conflict`,
    /// `not_dead`,
    /// `quota_exceeded`, `payload_too_large`, `unsupported_media_type`, `rate_limited`,
    /// `unavailable`, `commit_outcome_unknown`, `not_ready`, `internal`.
    #[schema(example = "not_found")]
    code: &'a str,
    /// What the error is about, when it is about one value: a body field or its path in the
    /// body (`url`, `deliveries[3].event_type`), a path parameter (`id`) or a query parameter
    /// (`tenant_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    /// With `quota_exceeded`: the tenant quota the request would exceed (`channels`,
    /// `active_keys`: 409; `deliveries_per_second`, `deliveries_per_day`: 429).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<breakwater_core::quotas::Quota>)]
    quota: Option<&'a str>,
    /// With `schema_violation`: the first (up to 5) failing parts of the value named by
    /// `field`, each a JSON pointer into it and what is wrong there.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    #[schema(value_type = Vec<breakwater_core::event_types::Violation>)]
    errors: &'a [breakwater_core::event_types::Violation],
}

impl ApiError {
    /// An error with this status, code and detail.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            field: None,
            quota: None,
            headers: Vec::new(),
            violations: None,
        }
    }

    /// 404: `what` does not exist (or belongs to another tenant).
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    /// 422 naming a field.
    pub fn invalid(field: &'static str, detail: impl Into<String>) -> Self {
        let mut e = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
            format!("{field}: {}", detail.into()),
        );
        e.field = Some(Cow::Borrowed(field));
        e
    }

    /// The same error about item `index` of the body's list `list`: the detail and the field
    /// name the item, e.g. `deliveries[3].event_type` (a batch refuses the whole list for one
    /// bad item, so the client must know which).
    pub fn in_item(mut self, list: &str, index: usize) -> Self {
        self.detail = format!("{list}[{index}].{}", self.detail);
        self.field = self
            .field
            .map(|f| Cow::Owned(format!("{list}[{index}].{f}")));
        self
    }

    /// 500, opaque; `cause` goes to the log only.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the server log",
        )
    }
}

/// The `tracing` target of the debug event that records each problem body the API answers.
pub const PROBLEM_LOG_TARGET: &str = "breakwater_api::problem";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let body = Problem {
            kind: format!("urn:breakwater:problem:{}", self.code),
            title,
            status: self.status.as_u16(),
            detail: &self.detail,
            code: self.code,
            field: self.field.as_deref(),
            quota: self.quota,
            errors: self.violations.as_deref().map_or(&[], Vec::as_slice),
        };
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        // Every problem body the API answers, at debug level under its own target: the e2e
        // suite collects them all and checks that none carries an internal address.
        tracing::debug!(
            target: PROBLEM_LOG_TARGET,
            status = body.status,
            body = %String::from_utf8_lossy(&bytes),
            "problem answered"
        );
        let mut resp = (
            self.status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            bytes,
        )
            .into_response();
        for (k, v) in self.headers {
            if let Ok(v) = v.parse() {
                resp.headers_mut().insert(k, v);
            }
        }
        resp
    }
}

impl From<breakwater_core::Error> for ApiError {
    fn from(e: breakwater_core::Error) -> Self {
        use breakwater_core::Error as E;
        match e {
            E::NotFound(what) => ApiError::not_found(what),
            E::Invalid { field, message } => ApiError::invalid(field, message),
            E::SchemaViolation { field, violations } => {
                let parts: Vec<String> = violations
                    .iter()
                    .map(|v| format!("{:?}: {}", v.pointer, v.message))
                    .collect();
                let mut e = ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "schema_violation",
                    format!(
                        "{field} does not match the event type's schema at {}",
                        parts.join("; ")
                    ),
                );
                e.field = Some(Cow::Borrowed(field));
                e.violations = Some(Box::new(violations));
                e
            }
            E::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            // The caller that gave a list names the item ([`ApiError::in_item`]); a single
            // delivery's is the `Idempotency-Key` header's.
            E::ItemConflict { field, message, .. } => {
                let mut e = ApiError::new(
                    StatusCode::CONFLICT,
                    "conflict",
                    format!("{field}: {message}"),
                );
                e.field = Some(Cow::Borrowed(field));
                e
            }
            // A count (channels, keys) conflicts with what the tenant holds: retrying does not
            // help until it deletes one or the operator raises the quota, so 409 (not 429, whose
            // `Retry-After` would promise it). A rate is 429, with `Retry-After` when waiting
            // makes the request fit.
            E::QuotaExceeded {
                quota,
                retry_after,
                message,
                ..
            } => {
                let status = if quota.is_count() {
                    StatusCode::CONFLICT
                } else {
                    StatusCode::TOO_MANY_REQUESTS
                };
                let mut e = ApiError::new(status, "quota_exceeded", message);
                e.quota = Some(quota.as_str());
                if let Some(wait) = retry_after {
                    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                    e.headers
                        .push((header::RETRY_AFTER, secs.max(1).to_string()));
                }
                e
            }
            E::Database(sqlx::Error::Database(db)) if db.is_unique_violation() => ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                "a conflicting object already exists",
            ),
            // Text or jsonb the database cannot store: U+0000 in a string (22021, 22P05).
            E::Database(sqlx::Error::Database(db))
                if matches!(db.code().as_deref(), Some("22021" | "22P05")) =>
            {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_text",
                    "strings must not contain the NUL character (U+0000)",
                )
            }
            // A row lock not granted within the API's lock_timeout (55P03), a statement past
            // its statement_timeout (57014), or no free connection: busy, not broken. The
            // request changed nothing (its transaction rolled back); try again shortly.
            // Logged once here with the cause, which the 503's body does not tell.
            E::Database(sqlx::Error::Database(db))
                if matches!(db.code().as_deref(), Some("55P03" | "57014")) =>
            {
                tracing::warn!(code = ?db.code(), error = %db.message(), "database busy: 503");
                ApiError::unavailable()
            }
            E::Database(sqlx::Error::PoolTimedOut) => {
                tracing::warn!("no free database connection in time: 503");
                ApiError::unavailable()
            }
            // The database unreachable, restarting or failing over: nothing was committed
            // (a lost `COMMIT` is [`ApiError::commit_unknown`], mapped where it happens).
            other if other.is_transient() => {
                tracing::warn!(error = %other, "database unavailable: 503");
                ApiError::unavailable()
            }
            other => ApiError::internal(other),
        }
    }
}

impl ApiError {
    /// 503 with `Retry-After: 1`: the database could not serve this request in time (a lock
    /// held elsewhere, a busy pool); nothing was changed.
    pub fn unavailable() -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the service is busy; nothing was changed, retry shortly",
        );
        e.headers.push((header::RETRY_AFTER, "1".into()));
        e
    }
}

impl ApiError {
    /// 503 `commit_outcome_unknown` with `Retry-After: 1`: the connection to the database was
    /// lost while the request's `COMMIT` was on its way, so it may or may not have taken effect.
    /// Retrying with the same `Idempotency-Key` is safe and tells: it answers the
    /// first request's objects if it did, and creates them if it did not.
    pub fn commit_unknown() -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "commit_outcome_unknown",
            "the connection to the database was lost while this request was committing; it may \
             or may not have taken effect: retry it with the same Idempotency-Key",
        );
        e.headers.push((header::RETRY_AFTER, "1".into()));
        e
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        breakwater_core::Error::from(e).into()
    }
}
