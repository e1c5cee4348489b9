//! The problem responses of the OpenAPI document (`#/components/responses/<name>`, each an
//! RFC 9457 `application/problem+json` body, [`crate::error::Problem`]), the markers a handler's
//! `responses(...)` names them by ([`TenantAuth`], [`ById`], …), and the security schemes.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use utoipa::openapi::header::Header;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::Type;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, HeaderBuilder, ObjectBuilder, Ref, RefOr};
use utoipa::{IntoResponses, Modify};

/// One problem response, shared by every operation that can answer it
/// (`#/components/responses/<name>`); the body is a [`crate::error::Problem`].
struct ProblemResponse {
    status: &'static str,
    name: &'static str,
    description: &'static str,
    /// Sends `Retry-After` (seconds).
    retry_after: bool,
    /// Sends `WWW-Authenticate: Bearer`.
    www_authenticate: bool,
    /// May send `Accept-Encoding` (the content codings a request body may use).
    accept_encoding: bool,
}

/// A problem response that sends no header of its own.
const fn problem(
    status: &'static str,
    name: &'static str,
    description: &'static str,
) -> ProblemResponse {
    ProblemResponse {
        status,
        name,
        description,
        retry_after: false,
        www_authenticate: false,
        accept_encoding: false,
    }
}

const BAD_REQUEST: ProblemResponse = problem(
    "400",
    "BadRequest",
    "The request does not parse: a path id that is not a UUID (`invalid_path`), a \
    query string of the wrong form (`invalid_query`: a parameter the route does not take or \
    given twice, or not UTF-8), or a body that is not well-formed JSON \
    (`malformed_json`).",
);
const UNAUTHORIZED: ProblemResponse = ProblemResponse {
    www_authenticate: true,
    ..problem(
        "401",
        "Unauthorized",
        "No `Authorization: Bearer <key>` header, or an unknown or revoked key \
        (`unauthorized`).",
    )
};
const FORBIDDEN: ProblemResponse = problem(
    "403",
    "Forbidden",
    "A valid key of the wrong kind: a tenant key on an operator route or the \
    operator key on a tenant route (`forbidden`).",
);
const NOT_FOUND: ProblemResponse = problem(
    "404",
    "NotFound",
    "No such object, or it belongs to another tenant (`not_found`).",
);
const CONFLICT: ProblemResponse = problem(
    "409",
    "Conflict",
    "The request conflicts with the object's state (`conflict`, `not_dead`), or would take \
    the tenant over a count quota (`quota_exceeded` with `quota`: `channels` or `active_keys`; \
    delete a channel or revoke a key first, or ask the operator to raise it).",
);
const PAYLOAD_TOO_LARGE: ProblemResponse = problem(
    "413",
    "PayloadTooLarge",
    "The body, or a delivery's payload, is larger than the route accepts \
    (`payload_too_large`; `api.max_payload_bytes`, `api.max_batch_body_bytes`).",
);
const UNSUPPORTED_MEDIA_TYPE: ProblemResponse = ProblemResponse {
    accept_encoding: true,
    ..problem(
        "415",
        "UnsupportedMediaType",
        "The body is not sent as `Content-Type: application/json`, or it is sent with a \
    `Content-Encoding` other than `identity` (`unsupported_media_type`; the answer's \
    `Accept-Encoding: identity` says what is accepted, RFC 9110 §12.5.3).",
    )
};
const INVALID: ProblemResponse = problem(
    "422",
    "Invalid",
    "Well-formed but invalid: a body of the wrong shape (`invalid_body`: a missing \
    or unknown field, a wrong type), a bad value of a body field or a query parameter \
    (`invalid_field`, with `field` naming it), or text with a NUL character (`invalid_text`).",
);
const TOO_MANY_REQUESTS: ProblemResponse = ProblemResponse {
    retry_after: true,
    ..problem(
        "429",
        "TooManyRequests",
        "The tenant (all its API keys together) made more requests than \
        `api.ingress_per_second` allows (`rate_limited`), or the request's new deliveries would \
        take it over its `deliveries_per_second` or `deliveries_per_day` quota \
        (`quota_exceeded`, with `quota` naming it; nothing of the request was accepted). Retry \
        after `Retry-After` seconds; a request larger than the whole quota gets no \
        `Retry-After` (it never fits: split it).",
    )
};
const SERVICE_UNAVAILABLE: ProblemResponse = ProblemResponse {
    retry_after: true,
    ..problem(
        "503",
        "ServiceUnavailable",
        "The database could not serve the request in time (a row lock held elsewhere, \
        a busy pool, the database unreachable: `unavailable`), or is unreachable (`not_ready`). \
        Nothing was changed; retry after `Retry-After` seconds. `commit_outcome_unknown`: the \
        connection was lost while the request committed, so it may or may not have taken \
        effect; retry it with the same `Idempotency-Key`.",
    )
};

const ALL_PROBLEMS: [&ProblemResponse; 10] = [
    &BAD_REQUEST,
    &UNAUTHORIZED,
    &FORBIDDEN,
    &NOT_FOUND,
    &CONFLICT,
    &PAYLOAD_TOO_LARGE,
    &UNSUPPORTED_MEDIA_TYPE,
    &INVALID,
    &TOO_MANY_REQUESTS,
    &SERVICE_UNAVAILABLE,
];

impl ProblemResponse {
    fn response(&self) -> Response {
        let mut r = ResponseBuilder::new()
            .description(self.description)
            .content(
                "application/problem+json",
                Content::new(Some(Ref::from_schema_name("Problem"))),
            );
        if self.retry_after {
            r = r.header(
                "Retry-After",
                header(Type::Integer, "Seconds to wait before retrying."),
            );
        }
        if self.www_authenticate {
            r = r.header("WWW-Authenticate", header(Type::String, "`Bearer`."));
        }
        if self.accept_encoding {
            r = r.header(
                "Accept-Encoding",
                header(
                    Type::String,
                    "`identity`: sent when the body had a content coding.",
                ),
            );
        }
        r.build()
    }
}

/// A response header of the given type.
fn header(schema_type: Type, description: &str) -> Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(schema_type))
        .description(Some(description))
        .build()
}

/// References to the given problem responses, keyed by status.
fn refs(problems: &[&ProblemResponse]) -> BTreeMap<String, RefOr<Response>> {
    problems
        .iter()
        .map(|p| {
            (
                p.status.to_string(),
                RefOr::Ref(Ref::from_response_name(p.name)),
            )
        })
        .collect()
}

/// `A`'s responses and references to the given problem responses.
fn with<A: IntoResponses>(problems: &[&ProblemResponse]) -> BTreeMap<String, RefOr<Response>> {
    let mut responses = A::responses();
    responses.extend(refs(problems));
    responses
}

/// Declares a marker that a handler's `responses(...)` names: it answers the given problem
/// responses.
macro_rules! problem_marker {
    ($(#[$doc:meta])* $name:ident = [$($problem:ident),+ $(,)?]) => {
        $(#[$doc])*
        pub(crate) struct $name;
        impl IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                refs(&[$(&$problem),+])
            }
        }
    };
}

problem_marker!(
    /// `responses(...)` of a route behind a tenant key: 401 (no or unknown key), 403 (the
    /// operator key), 429 (the tenant's ingress limit or a delivery quota), 503 (database busy).
    TenantAuth = [
        UNAUTHORIZED,
        FORBIDDEN,
        TOO_MANY_REQUESTS,
        SERVICE_UNAVAILABLE,
    ]
);
problem_marker!(
    /// `responses(...)` of a route behind the operator key: 401 (no or unknown key), 403 (a
    /// tenant key), 503 (database busy).
    OperatorAuth = [UNAUTHORIZED, FORBIDDEN, SERVICE_UNAVAILABLE]
);
problem_marker!(
    /// `responses(...)` of a route with a JSON body: 400 (malformed JSON), 413 (too large), 415
    /// (not `application/json`), 422 (wrong shape or invalid field).
    JsonBody = [
        BAD_REQUEST,
        PAYLOAD_TOO_LARGE,
        UNSUPPORTED_MEDIA_TYPE,
        INVALID,
    ]
);
problem_marker!(
    /// `responses(...)`: 409, the object's state does not allow it.
    Conflict = [CONFLICT]
);
problem_marker!(
    /// `responses(...)`: 404, an object named in the query (e.g. `channel_id`) does not exist or
    /// is another tenant's.
    NotFound = [NOT_FOUND]
);
problem_marker!(
    /// `responses(...)`: 503, the database is unreachable or busy (public routes that read it).
    Unavailable = [SERVICE_UNAVAILABLE]
);

/// `responses(...)` of a route with an object's id (or host key) in its path: `A`'s responses
/// (e.g. [`TenantAuth`]), and 400 (an id that is not a UUID) and 404 (no such object, or
/// another tenant's).
pub(crate) struct ById<A>(PhantomData<A>);
impl<A: IntoResponses> IntoResponses for ById<A> {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        with::<A>(&[&BAD_REQUEST, &NOT_FOUND])
    }
}

/// `responses(...)` of a route with a query string: `A`'s responses (e.g. [`OperatorAuth`]), and
/// 400 (a query string of the wrong form: a parameter the route does not take, one given twice,
/// one not UTF-8) and 422 (a bad value of a parameter it takes, e.g. an id that is not a UUID).
pub(crate) struct WithQuery<A>(PhantomData<A>);
impl<A: IntoResponses> IntoResponses for WithQuery<A> {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        with::<A>(&[&BAD_REQUEST, &INVALID])
    }
}

/// Adds the problem responses and the security schemes to the document's components.
pub(super) struct Components;

impl Modify for Components {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for p in ALL_PROBLEMS {
            components
                .responses
                .insert(p.name.to_string(), RefOr::T(p.response()));
        }
        let bearer = |description: &str, format: &str| {
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format(format)
                    .description(Some(description))
                    .build(),
            )
        };
        components.add_security_scheme(
            "tenant_key",
            bearer(
                "A tenant's API key (`bw_…`), shown once when the operator creates the tenant, \
                 or a portal session's token (`bwp_…`, on the portal's routes only, and only \
                 reads with the `read` scope; 403 elsewhere). Each tenant, all its keys and \
                 sessions together, is limited to `api.ingress_per_second` requests per second \
                 (429 above).",
                "bw_…",
            ),
        );
        components.add_security_scheme(
            "operator_key",
            bearer(
                "The operator key (`BREAKWATER_OPERATOR_KEY`, at least 16 characters).",
                "opaque",
            ),
        );
        components.add_security_scheme(
            "metrics_token",
            bearer(
                "The metrics token (`BREAKWATER_METRICS_TOKEN`); `/metrics` is open when it is \
                 not set.",
                "opaque",
            ),
        );
    }
}
