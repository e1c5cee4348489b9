//! Extractors whose rejections are problem+json.

use crate::error::ApiError;
use crate::AppState;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

/// `read` (a read of the request body), or 408 `request_timeout` once the API's
/// `body_read_timeout_ms` has passed: a client that sends part of a body and stops (slow loris)
/// does not hold a connection and a task for good.
pub(crate) async fn within_body_deadline<T>(
    state: &AppState,
    read: impl Future<Output = T>,
) -> Result<T, ApiError> {
    let limit = Duration::from_millis(state.settings().config.body_read_timeout_ms);
    tokio::time::timeout(limit, read).await.map_err(|_| {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request body did not arrive within {} ms",
                limit.as_millis()
            ),
        )
    })
}

/// A JSON body whose rejections become problems: missing `Content-Type: application/json`, or a
/// `Content-Encoding` other than `identity` (no body is decoded) → 415, body over the route's
/// limit → 413, malformed JSON anywhere in the body → 400, and only then well-formed JSON of the
/// wrong shape (not an object, missing field, wrong type, unknown field) → 422 whose `field` is
/// the path to the bad value (`deliveries[2].payload`) when there is one. (axum's own `Json`
/// stops at the first error, so a type error before a syntax error would be a 422; here syntax
/// is checked first.)
///
/// Every body of this API is a JSON object, and only an object is accepted: serde would also
/// read a struct from an array of its fields in order (`[null, null]` as
/// `{"failure_threshold": null, "cooldown_ms": null}`), which no client means.
pub struct Json<T>(pub T);

/// The most a route reads of a body, bytes, as the 413 of [`Json`] states it: a route with a
/// limit of its own sets it with [`limit_body`]; any other has axum's default.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit(usize);

/// axum's default body limit (`DefaultBodyLimit`), bytes: 2 MiB.
const DEFAULT_BODY_LIMIT: usize = 2 * 1024 * 1024;

/// `route` with a body limit of `bytes`: axum's `DefaultBodyLimit`, and the figure the 413 says.
pub(crate) fn limit_body(
    route: axum::routing::MethodRouter<AppState>,
    bytes: usize,
) -> axum::routing::MethodRouter<AppState> {
    route
        .layer::<_, std::convert::Infallible>(axum::extract::DefaultBodyLimit::max(bytes))
        .layer::<_, std::convert::Infallible>(axum::Extension(BodyLimit(bytes)))
}

impl<T: DeserializeOwned> FromRequest<AppState> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|m| {
                let m = m.trim().to_ascii_lowercase();
                m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
            })
            .unwrap_or(false);
        // No content coding is read (RFC 9110 §15.5.16: 415 for an unsupported
        // Content-Encoding; the answer's Accept-Encoding names the one accepted, §12.5.3).
        let encoded = req
            .headers()
            .get_all(axum::http::header::CONTENT_ENCODING)
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("?").split(','))
            .any(|coding| !coding.trim().eq_ignore_ascii_case("identity"));
        if encoded {
            let mut e = ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body without a content coding (Content-Encoding: identity or none)",
            );
            e.headers
                .push((axum::http::header::ACCEPT_ENCODING, "identity".to_string()));
            return Err(e);
        }
        if !is_json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(DEFAULT_BODY_LIMIT, |l| l.0);
        let bytes = within_body_deadline(state, axum::body::Bytes::from_request(req, state))
            .await?
            .map_err(|r| {
                if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "payload_too_large",
                        format!("the request body is larger than this route accepts: at most {limit} bytes"),
                    )
                } else {
                    ApiError::new(r.status(), "bad_request", r.body_text())
                }
            })?;
        // Syntax first: any malformed JSON is a 400, wherever the error is.
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_json",
                format!("malformed JSON: {e}"),
            ));
        }
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                "the body must be a JSON object",
            ));
        }
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        match serde_path_to_error::deserialize::<_, T>(de) {
            Ok(v) => Ok(Json(v)),
            Err(e) => {
                let path = e.path().to_string();
                let message = plain_types(&e.inner().to_string(), &path);
                let detail = if path == "." {
                    message
                } else {
                    format!("{path}: {message}")
                };
                let mut problem =
                    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", detail);
                problem.field = field_of(&path, &e.inner().to_string()).map(Cow::Owned);
                Err(problem)
            }
        }
    }
}

/// `axum::extract::Path` whose rejection (e.g. an id that is not a UUID) is a 400 problem
/// `invalid_path` whose `field` names the path parameter (`id`) when axum tells which.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(r) => {
                // A tuple of parameters reports the index of the bad one; its name is the
                // route's parameter at that index.
                let names: Vec<String> =
                    axum::extract::RawPathParams::from_request_parts(parts, state)
                        .await
                        .map(|raw| raw.iter().map(|(k, _)| k.to_string()).collect())
                        .unwrap_or_default();
                Err(path_rejection(r, &names))
            }
        }
    }
}

/// serde's name of a number type in `message` (`invalid type: string "30s", expected i64`) in
/// the words a client needs (`expected an integer`), with the unit of a field whose name ends
/// in `_ms` (the API's durations).
fn plain_types(message: &str, path: &str) -> String {
    let unit = if path.ends_with("_ms") {
        " (milliseconds)"
    } else {
        ""
    };
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find("expected ") {
        let (before, after) = rest.split_at(at + "expected ".len());
        out.push_str(before);
        let len = after
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after.len());
        let (word, tail) = after.split_at(len);
        match word {
            "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => out.push_str("an integer"),
            "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => out.push_str("a whole number ≥ 0"),
            "f32" | "f64" => out.push_str("a number"),
            _ => {
                out.push_str(word);
                rest = tail;
                continue;
            }
        }
        out.push_str(unit);
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Cuts a value echoed back in an error to 200 characters (a 20-kB path is not sent back whole).
fn cut(text: &str) -> String {
    let mut out: String = text.chars().take(200).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// The 400 for `r`; `names` are the route's path parameters in order. An id that is not a UUID
/// says so in those words: axum's own text ("Invalid URL: Cannot parse `id` …") reads as if
/// the channel's URL were wrong.
fn path_rejection(r: PathRejection, names: &[String]) -> ApiError {
    use axum::extract::path::ErrorKind;
    let (key, value) = match &r {
        PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
            ErrorKind::ParseErrorAtKey { key, value, .. }
            | ErrorKind::DeserializeError { key, value, .. } => (Some(key.clone()), Some(value)),
            ErrorKind::InvalidUtf8InPathParam { key } => (Some(key.clone()), None),
            ErrorKind::ParseErrorAtIndex { index, value, .. } => {
                (names.get(*index).cloned(), Some(value))
            }
            _ => (None, None),
        },
        _ => (None, None),
    };
    let detail = match (key.as_deref(), value) {
        (Some(k), Some(v)) if k == "id" || k.ends_with("_id") => format!(
            "the request path's `{k}` is not a UUID (ids look like \
             0193f1c2-7a5e-7c3b-9d4f-2b6e8a1c5d07): `{}`",
            cut(v)
        ),
        _ => {
            let text = r.body_text();
            let text = text.strip_prefix("Invalid URL: ").unwrap_or(&text);
            format!("the request path does not parse: {}", cut(text))
        }
    };
    let mut e = ApiError::new(StatusCode::BAD_REQUEST, "invalid_path", detail);
    e.field = key.map(Cow::Owned);
    e
}

/// The query parameters a route's [`Query`] takes: `T`'s own, as the OpenAPI document lists them
/// (`utoipa::IntoParams`), and `after` and `limit` when `T` flattens a
/// [`PageQuery`](crate::page::PageQuery) (whose fields `T` marks `#[param(ignore)]`).
pub(crate) trait QueryParams: utoipa::IntoParams {
    /// Whether `T` flattens a `PageQuery`.
    const PAGED: bool;

    /// Every parameter name the route takes, in the document's order.
    fn names() -> Vec<String> {
        let mut names: Vec<String> = Self::into_params(|| None)
            .into_iter()
            .map(|p| p.name)
            .collect();
        if Self::PAGED {
            names.extend(
                <crate::page::PageQuery as utoipa::IntoParams>::into_params(|| None)
                    .into_iter()
                    .map(|p| p.name),
            );
        }
        names
    }
}

/// A list route without filters takes the paging parameters alone.
impl QueryParams for crate::page::PageQuery {
    const PAGED: bool = false;
}

/// `axum::extract::Query`'s reading of the query string (`application/x-www-form-urlencoded`,
/// as `serde_urlencoded` reads it). The query string itself is checked here, each refusal a 400
/// problem `invalid_query` whose `field` names the parameter: a name or value that is not UTF-8
/// once percent-decoded (refused, not replaced by U+FFFD), a parameter the route does not take
/// ([`QueryParams`]; the refusal names the ones it takes: a misspelt filter (`?stauts=dead`)
/// would otherwise be ignored and answer as if no filter had been asked for), and a parameter
/// given twice. A *value* is the route's to check: query structs hold text, and the route
/// answers a bad one with a 422 `invalid_field` naming the parameter (`?tenant_id=x`, `?limit=0`),
/// as a bad body field.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + QueryParams> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        check_query_utf8(query)?;
        let known = T::names();
        if let Some((name, _)) =
            form_urlencoded::parse(query.as_bytes()).find(|(k, _)| !known.iter().any(|n| n == k))
        {
            let mut problem = ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!(
                    "unknown query parameter `{}`; this route takes {}",
                    cut(&name),
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            );
            problem.field = Some(Cow::Owned(cut(&name)));
            return Err(problem);
        }
        // A parameter given twice is refused as an unknown one is: which of the two the route
        // would read (serde's refusal, or the first for a paging parameter) is not a choice the
        // client meant to leave to it, and `?status=dead&status=failed` is not an OR.
        let mut seen: Vec<Cow<'_, str>> = Vec::new();
        for (name, _) in form_urlencoded::parse(query.as_bytes()) {
            if seen.contains(&name) {
                let mut problem = ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_query",
                    format!("query parameter `{name}` is given more than once; give it once"),
                );
                problem.field = Some(Cow::Owned(name.into_owned()));
                return Err(problem);
            }
            seen.push(name);
        }
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize::<_, T>(de)
            .map(Query)
            .map_err(|e| {
                // Every parameter is read as text and checked by its route (422 naming it), so
                // this is a backstop: a value serde refuses is a 422 naming the parameter too.
                let path = e.path().to_string();
                let message = plain_types(&e.inner().to_string(), &path);
                match field_of(&path, &e.inner().to_string()) {
                    Some(field) => {
                        let mut problem = ApiError::new(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "invalid_field",
                            format!("{field}: {message}"),
                        );
                        problem.field = Some(Cow::Owned(field));
                        problem
                    }
                    None => ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "invalid_query",
                        format!("the query string does not parse: {message}"),
                    ),
                }
            })
    }
}

/// A JSON body that may be absent, for routes whose every body field is optional (a replay
/// window, a key's label, a rotation's grace): an empty body is `T::default()`, so a bare `POST`
/// works; anything else goes through [`Json`] (415 without a JSON content type, 400 malformed,
/// 422 wrong shape). At most 64 KiB, read within the body deadline.
pub(crate) struct OptionalJson<T>(pub(crate) T);

/// The most an [`OptionalJson`] body may be, bytes (64 KiB).
const OPTIONAL_BODY_LIMIT: usize = 64 * 1024;

impl<T: serde::de::DeserializeOwned + Default> FromRequest<AppState> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let bytes = within_body_deadline(state, axum::body::to_bytes(body, OPTIONAL_BODY_LIMIT))
            .await?
            .map_err(|e| {
                // A body over the limit is a 413; any other failure to read it, a 400.
                let too_large = std::error::Error::source(&e)
                    .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
                if too_large {
                    ApiError::new(
                        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                        "payload_too_large",
                        format!(
                            "the request body is larger than this route accepts: at most {OPTIONAL_BODY_LIMIT} bytes"
                        ),
                    )
                } else {
                    ApiError::new(
                        axum::http::StatusCode::BAD_REQUEST,
                        "bad_request",
                        format!("the request body could not be read: {e}"),
                    )
                }
            })?;
        if bytes.is_empty() {
            return Ok(OptionalJson(T::default()));
        }
        let req = Request::from_parts(parts, axum::body::Body::from(bytes));
        let Json(v) = Json::<T>::from_request(req, state).await?;
        Ok(OptionalJson(v))
    }
}

/// A 400 `invalid_query` naming the parameter if a name or value of `query` percent-decodes to
/// bytes that are not UTF-8 (`?reason=%FF`): refused, where the form decoding would replace them
/// with U+FFFD and store text the caller never sent.
fn check_query_utf8(query: &str) -> Result<(), ApiError> {
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8()
                .map(|d| d.into_owned())
        };
        let name = decoded(name);
        if name.is_ok() && decoded(value).is_ok() {
            continue;
        }
        let mut problem = ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            "a query parameter's name or value is not UTF-8 once percent-decoded",
        );
        // The field is named when its name is readable (at most 200 characters of it).
        problem.field = name.ok().map(|n| Cow::Owned(n.chars().take(200).collect()));
        return Err(problem);
    }
    Ok(())
}

/// The field a deserialization error is about: `path` (serde_path_to_error's, `.` for the
/// top level), extended by the name serde gives for a missing, duplicate or unknown field
/// (``missing field `payload` `` at `deliveries[1]` → `deliveries[1].payload`); `None` when
/// neither names one.
fn field_of(path: &str, message: &str) -> Option<String> {
    let named = ["missing field `", "duplicate field `", "unknown field `"]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split('`').next())
        .filter(|name| !name.is_empty());
    match (path, named) {
        (".", None) => None,
        (".", Some(name)) => Some(name.to_string()),
        (path, Some(name)) if !path.ends_with(name) => Some(format!("{path}.{name}")),
        (path, _) => Some(path.to_string()),
    }
}

/// Whether a client's `x-request-id` is kept: 1 to 128 characters of ASCII letters, digits and
/// `-_.:/+=@` (UUIDs, ULIDs, W3C trace ids, base64 and `service/123`-style ids all fit). Markup
/// and quote characters (`<>"'&`…) are never kept: the id is shown on the admin page and in
/// logs, and an id that needs escaping there is not an id.
fn well_formed_request_id(v: &[u8]) -> bool {
    !v.is_empty()
        && v.len() <= 128
        && v.iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/+=@".contains(b))
}

/// Removes a client's `x-request-id` that is not well formed ([`well_formed_request_id`]), so
/// the request-id layer gives the request a fresh one.
pub(crate) async fn drop_malformed_request_id(mut req: Request) -> Request {
    let bad = req
        .headers()
        .get_all("x-request-id")
        .iter()
        .any(|v| !well_formed_request_id(v.as_bytes()))
        || req.headers().get_all("x-request-id").iter().count() > 1;
    if bad {
        req.headers_mut().remove("x-request-id");
    }
    req
}

/// The id of the request: the `x-request-id` header, set by the API's request-id layer (a fresh
/// UUID unless the client sent a well-formed one) and sent back on the response. It tags the
/// request's audit rows ([`breakwater_core::audit::begin_request`]). A client's id longer than
/// 128 characters or with other characters than [`well_formed_request_id`] keeps is replaced by
/// a fresh UUID.
pub struct RequestId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RequestId {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let given = parts
            .extensions
            .get::<tower_http::request_id::RequestId>()
            .and_then(|r| r.header_value().to_str().ok())
            .filter(|v| well_formed_request_id(v.as_bytes()));
        Ok(Self(match given {
            Some(v) => v.to_string(),
            None => uuid::Uuid::new_v4().to_string(),
        }))
    }
}

/// A `T` (a struct) read only from a JSON object. serde's derived `Deserialize` for a struct
/// also reads a JSON array of its fields in order (`["a.b", {}, null]` as a batch item); no
/// client means that, so inside a body the array form is refused like any other wrong type
/// (422 `invalid_body`, the path naming the element). [`Json`] does the same for the whole body.
pub(crate) struct ObjectOnly<T>(pub(crate) T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for ObjectOnly<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Visitor(std::marker::PhantomData))
            .map(ObjectOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::{field_of, plain_types};

    #[test]
    fn serde_number_types_are_said_in_plain_words() {
        assert_eq!(
            plain_types(
                "invalid type: string \"30s\", expected i64 at line 1 column 20",
                "cooldown_ms"
            ),
            "invalid type: string \"30s\", expected an integer (milliseconds) at line 1 column 20"
        );
        assert_eq!(
            plain_types("invalid value: integer `-1`, expected u32", "limit"),
            "invalid value: integer `-1`, expected a whole number ≥ 0"
        );
        assert_eq!(
            plain_types("invalid type: map, expected f64", "x"),
            "invalid type: map, expected a number"
        );
        // Other expectations, and words that only start like a type, are left alone.
        assert_eq!(
            plain_types("invalid type: integer `7`, expected a string", "name"),
            "invalid type: integer `7`, expected a string"
        );
        assert_eq!(plain_types("expected i64x", "n"), "expected i64x");
    }

    #[test]
    fn a_deserialization_error_names_its_field() {
        let f = |path, msg| field_of(path, msg);
        assert_eq!(f(".", "missing field `payload`"), Some("payload".into()));
        assert_eq!(f(".", "duplicate field `limit`"), Some("limit".into()));
        assert_eq!(
            f("deliveries[1]", "missing field `event_type`"),
            Some("deliveries[1].event_type".into())
        );
        assert_eq!(
            f(
                "deliveries[1].event_type",
                "invalid type: integer `7`, expected a string"
            ),
            Some("deliveries[1].event_type".into())
        );
        assert_eq!(
            f(
                "plan",
                "unknown field `plan`, expected one of `name`, `tier`"
            ),
            Some("plan".into())
        );
        assert_eq!(f(".", "invalid type: sequence, expected a map"), None);
    }
}
