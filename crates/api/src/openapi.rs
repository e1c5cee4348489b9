//! The API's OpenAPI 3.1 document, generated from the handlers' own annotations so that it
//! cannot drift from the code.
//!
//! - Served at `GET /api/v1/openapi.json` (unauthenticated; built once per process: [`json`]).
//! - Printed by `breakwater openapi`, and committed as `docs/openapi.json`. The e2e tests in
//!   `tests/e2e/openapi.rs` fail when the committed copy differs from what the code generates,
//!   and when a route of the router is missing from the document or the document names a route
//!   the router does not have.
//! - `scripts/schemathesis.sh` fuzzes the running service against it (CI runs it).
//!
//! # Adding a route
//!
//! 1. Annotate its handler with `#[utoipa::path(...)]`, next to the handler, e.g.
//!    ```text
//!    /// Reads a channel.                          <- summary (first line) and description
//!    #[utoipa::path(
//!        get, path = "/api/v1/channels/{id}", tag = "channels",
//!        operation_id = "get_channel",             <- unique across the API
//!        params(("id" = Uuid, Path, description = "Channel id.")),
//!        responses(
//!            (status = 200, description = "The channel.", body = ChannelView),
//!            BadRequest, NotFound, TenantAuth,     <- the problem responses (below)
//!        ),
//!        security(("tenant_key" = [])),            <- or "operator_key"; none for public routes
//!    )]
//!    async fn read(...)
//!    ```
//!    Every status the handler can answer must be listed: its success, then the problem
//!    responses of this module that apply — [`TenantAuth`] or [`OperatorAuth`] for a route
//!    behind a key, [`BadRequest`] when it has a path id or a query string, [`JsonBody`] when it
//!    takes a JSON body, and [`NotFound`], [`Conflict`], [`Invalid`] as the handler can answer
//!    them. Request and response types derive `utoipa::ToSchema` (query structs
//!    `utoipa::IntoParams`); give a schema a distinct name with `#[schema(as = …)]` when its Rust
//!    name is generic (`Page`, `ListQuery`).
//! 2. Add the handler to `paths(...)` of [`ApiDoc`] below.
//! 3. Regenerate the committed copy: `cargo run -p breakwater -- openapi > docs/openapi.json`.
//!
//! The route test names any route the document lacks; schemathesis fails on any status, body or
//! content type the document does not describe.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, HeaderBuilder, Ref, RefOr};
use utoipa::{IntoResponses, Modify, OpenApi};

use crate::routes;

/// The document: every route's operation, the schemas they use, the problem responses and the
/// security schemes.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Breakwater",
        description = "Multi-tenant webhook delivery. Tenants register channels (HTTP endpoints) \
            and enqueue deliveries, which are signed per the Standard Webhooks spec and delivered \
            with retries, behind a circuit breaker per channel.\n\n\
            Every error is `application/problem+json` (RFC 9457) with a stable `code`. A tenant \
            only sees its own objects: another tenant's id answers 404 exactly like a missing one.",
    ),
    paths(
        routes::health::healthz,
        routes::health::readyz,
        routes::openapi::spec,
        routes::metrics::metrics,
        routes::admin::page,
        routes::admin::script,
        routes::admin::stylesheet,
        routes::tenants::create,
        routes::tenants::operator_list,
        routes::tenants::operator_read,
        routes::tenants::operator_update,
        routes::tenants::operator_rotate,
        routes::tenants::self_read,
        routes::tenants::self_update,
        routes::tenants::self_rotate,
        routes::channels::create,
        routes::channels::list,
        routes::channels::read,
        routes::channels::update,
        routes::channels::pause,
        routes::channels::resume,
        routes::channels::replay_window,
        routes::channels::enqueue_one,
        routes::channels::enqueue_batch,
        routes::deliveries::read,
        routes::deliveries::replay,
        routes::audit::list,
        routes::operator::list,
        routes::operator::read,
        routes::operator::act,
        routes::operator::defaults,
        routes::operator::set_defaults,
        routes::operator::audit_log,
        routes::hosts::list,
        routes::hosts::read,
        routes::hosts::act,
        routes::hosts::update,
        routes::queues::list,
        routes::deliveries::list,
        routes::messages::send,
        routes::messages::read,
        routes::secrets::rotate,
        routes::lifecycle::delete_channel,
        routes::lifecycle::delete_tenant,
        routes::lifecycle::cancel_delivery,
        routes::lifecycle::purge_payload,
        routes::keys::self_create,
        routes::keys::self_list,
        routes::keys::self_revoke,
        routes::keys::operator_create,
        routes::keys::operator_list,
        routes::keys::operator_revoke,
    ),
    components(schemas(
        crate::error::Problem,
        breakwater_core::deliveries::DeliverySummary,
        breakwater_core::keys::ApiKey,
    )),
    modifiers(&Components, &LinkKeys, &PageItems, &OptionalBodies),
    tags(
        (name = "channels", description = "A tenant's endpoints and their circuit breakers; \
            enqueueing deliveries to one."),
        (name = "deliveries", description = "A tenant's deliveries and their attempts; \
            cancelling one and purging its payload."),
        (name = "messages", description = "Events fanned out to every channel that subscribes \
            to their type."),
        (name = "keys", description = "The calling tenant's API keys."),
        (name = "tenant", description = "The calling tenant itself."),
        (name = "audit", description = "The tenant's audit log."),
        (name = "tenants", description = "Operator: create and manage tenants."),
        (name = "operator", description = "Operator: every tenant's channels and breakers, the \
            cluster-wide circuit defaults, the queues and the whole audit log."),
        (name = "health", description = "Liveness and readiness (no key)."),
        (name = "observability", description = "Prometheus metrics and this document."),
        (name = "admin page", description = "The operator's live page (HTML, script and style; \
            no key to load it, the page asks for the operator key)."),
    ),
)]
pub struct ApiDoc;

/// The document as pretty-printed JSON with a trailing newline: what `GET /api/v1/openapi.json`
/// serves, `breakwater openapi` prints and `docs/openapi.json` holds. Built on first use.
pub fn json() -> &'static str {
    static JSON: LazyLock<String> = LazyLock::new(|| {
        let mut s = ApiDoc::openapi()
            .to_pretty_json()
            .expect("the OpenAPI document serializes");
        s.push('\n');
        s
    });
    &JSON
}

/// utoipa 5.5 writes a response's Link Object with snake_case keys (`operation_id`) where
/// OpenAPI spells them `operationId`, `operationRef`, `requestBody`; this modifier moves each
/// into the link's (flattened) extensions under its OpenAPI name.
struct LinkKeys;

impl Modify for LinkKeys {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for op in operations.into_iter().flatten() {
                for response in op.responses.responses.values_mut() {
                    let RefOr::T(response) = response else {
                        continue;
                    };
                    for link in response.links.values_mut() {
                        let RefOr::T(link) = link else { continue };
                        let extensions = link.extensions.get_or_insert_with(Default::default);
                        if !link.operation_id.is_empty() {
                            let id = std::mem::take(&mut link.operation_id);
                            extensions.insert("operationId".into(), id.into());
                        }
                        if !link.operation_ref.is_empty() {
                            let r = std::mem::take(&mut link.operation_ref);
                            extensions.insert("operationRef".into(), r.into());
                        }
                        if let Some(body) = link.request_body.take() {
                            extensions.insert("requestBody".into(), body);
                        }
                    }
                }
            }
        }
    }
}

/// utoipa 5.5 inlines the type argument of a generic schema: `Page_Channel.data.items` is a
/// copy of the whole `Channel` schema instead of a reference to it
/// (<https://github.com/juhaku/utoipa/issues/1586>). This modifier makes the items of each
/// `Page_<T>` a `$ref` to `#/components/schemas/<T>`, registering `<T>` from the inlined copy
/// when the document does not have it yet, so a page's rows and a single row share one schema.
struct PageItems;

impl Modify for PageItems {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{ArrayItems, Schema};
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        let mut moved = Vec::new();
        for (name, schema) in components.schemas.iter_mut() {
            let Some(item) = name.strip_prefix("Page_") else {
                continue;
            };
            let RefOr::T(Schema::Object(page)) = schema else {
                continue;
            };
            let Some(RefOr::T(Schema::Array(data))) = page.properties.get_mut("data") else {
                continue;
            };
            let ArrayItems::RefOrSchema(items) = &mut data.items else {
                continue;
            };
            if let RefOr::T(inlined) = items.as_mut() {
                let inlined = std::mem::take(inlined);
                moved.push((item.to_string(), inlined));
                **items = RefOr::Ref(Ref::from_schema_name(item));
            }
        }
        for (name, schema) in moved {
            components.schemas.entry(name).or_insert(RefOr::T(schema));
        }
    }
}

/// utoipa writes an optional request body (`request_body(content = Option<T>)`) as a required
/// one of `null` or `T`; what the API means (and accepts) is no body at all or a `T`, never the
/// JSON `null`. This modifier makes such a body `T`, not required.
struct OptionalBodies;

impl Modify for OptionalBodies {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::Schema;
        use utoipa::openapi::Required;
        for item in openapi.paths.paths.values_mut() {
            let operations = [&mut item.put, &mut item.post, &mut item.patch];
            for op in operations.into_iter().flatten() {
                let Some(body) = op.request_body.as_mut() else {
                    continue;
                };
                let mut optional = false;
                for content in body.content.values_mut() {
                    let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema else {
                        continue;
                    };
                    let is_null = |s: &RefOr<Schema>| {
                        matches!(s, RefOr::T(Schema::Object(o))
                            if o.schema_type == utoipa::openapi::schema::SchemaType::Type(
                                utoipa::openapi::schema::Type::Null))
                    };
                    if one_of.items.len() == 2 && one_of.items.iter().any(is_null) {
                        let inner = one_of.items.iter().find(|s| !is_null(s)).cloned();
                        content.schema = inner;
                        optional = true;
                    }
                }
                if optional {
                    body.required = Some(Required::False);
                }
            }
        }
    }
}

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
}

const BAD_REQUEST: ProblemResponse = ProblemResponse {
    status: "400",
    name: "BadRequest",
    description: "The request does not parse: a path id that is not a UUID (`invalid_path`), a \
        query string of the wrong form (`invalid_query`), or a body that is not well-formed JSON \
        (`malformed_json`).",
    retry_after: false,
    www_authenticate: false,
};
const UNAUTHORIZED: ProblemResponse = ProblemResponse {
    status: "401",
    name: "Unauthorized",
    description: "No `Authorization: Bearer <key>` header, or an unknown or revoked key \
        (`unauthorized`).",
    retry_after: false,
    www_authenticate: true,
};
const FORBIDDEN: ProblemResponse = ProblemResponse {
    status: "403",
    name: "Forbidden",
    description: "A valid key of the wrong kind: a tenant key on an operator route or the \
        operator key on a tenant route (`forbidden`).",
    retry_after: false,
    www_authenticate: false,
};
const NOT_FOUND: ProblemResponse = ProblemResponse {
    status: "404",
    name: "NotFound",
    description: "No such object, or it belongs to another tenant (`not_found`).",
    retry_after: false,
    www_authenticate: false,
};
const CONFLICT: ProblemResponse = ProblemResponse {
    status: "409",
    name: "Conflict",
    description: "The request conflicts with the object's state (`conflict`, `not_dead`).",
    retry_after: false,
    www_authenticate: false,
};
const PAYLOAD_TOO_LARGE: ProblemResponse = ProblemResponse {
    status: "413",
    name: "PayloadTooLarge",
    description: "The body, or a delivery's payload, is larger than the route accepts \
        (`payload_too_large`; `api.max_payload_bytes`, `api.max_batch_body_bytes`).",
    retry_after: false,
    www_authenticate: false,
};
const UNSUPPORTED_MEDIA_TYPE: ProblemResponse = ProblemResponse {
    status: "415",
    name: "UnsupportedMediaType",
    description: "The body is not sent as `Content-Type: application/json` \
        (`unsupported_media_type`).",
    retry_after: false,
    www_authenticate: false,
};
const INVALID: ProblemResponse = ProblemResponse {
    status: "422",
    name: "Invalid",
    description: "Well-formed but invalid: a body of the wrong shape (`invalid_body`: a missing \
        or unknown field, a wrong type), a value out of range (`invalid_field`, with `field` \
        naming it), or text with a NUL character (`invalid_text`).",
    retry_after: false,
    www_authenticate: false,
};
const TOO_MANY_REQUESTS: ProblemResponse = ProblemResponse {
    status: "429",
    name: "TooManyRequests",
    description: "This API key made more requests than `api.ingress_per_second` allows \
        (`rate_limited`); retry after `Retry-After` seconds.",
    retry_after: true,
    www_authenticate: false,
};
const SERVICE_UNAVAILABLE: ProblemResponse = ProblemResponse {
    status: "503",
    name: "ServiceUnavailable",
    description: "The database could not serve the request in time (a row lock held elsewhere, \
        a busy pool: `unavailable`), or is unreachable (`not_ready`). Nothing was changed; retry \
        after `Retry-After` seconds.",
    retry_after: true,
    www_authenticate: false,
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
                HeaderBuilder::new()
                    .schema(
                        utoipa::openapi::ObjectBuilder::new()
                            .schema_type(utoipa::openapi::schema::Type::Integer),
                    )
                    .description(Some("Seconds to wait before retrying."))
                    .build(),
            );
        }
        if self.www_authenticate {
            r = r.header(
                "WWW-Authenticate",
                HeaderBuilder::new()
                    .schema(
                        utoipa::openapi::ObjectBuilder::new()
                            .schema_type(utoipa::openapi::schema::Type::String),
                    )
                    .description(Some("`Bearer`."))
                    .build(),
            );
        }
        r.build()
    }
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

/// `responses(...)` of a route behind a tenant key: 401 (no or unknown key), 403 (the operator
/// key), 429 (the key's ingress limit), 503 (database busy).
pub(crate) struct TenantAuth;
impl IntoResponses for TenantAuth {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[
            &UNAUTHORIZED,
            &FORBIDDEN,
            &TOO_MANY_REQUESTS,
            &SERVICE_UNAVAILABLE,
        ])
    }
}

/// `responses(...)` of a route behind the operator key: 401 (no or unknown key), 403 (a tenant
/// key), 503 (database busy).
pub(crate) struct OperatorAuth;
impl IntoResponses for OperatorAuth {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[&UNAUTHORIZED, &FORBIDDEN, &SERVICE_UNAVAILABLE])
    }
}

/// `responses(...)` of a route with a JSON body: 400 (malformed JSON), 413 (too large), 415 (not
/// `application/json`), 422 (wrong shape or invalid field).
pub(crate) struct JsonBody;
impl IntoResponses for JsonBody {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[
            &BAD_REQUEST,
            &PAYLOAD_TOO_LARGE,
            &UNSUPPORTED_MEDIA_TYPE,
            &INVALID,
        ])
    }
}

/// `responses(...)` of a route with a path id or a query string: 400.
pub(crate) struct BadRequest;
impl IntoResponses for BadRequest {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[&BAD_REQUEST])
    }
}

/// `responses(...)`: 404, no such object (or another tenant's).
pub(crate) struct NotFound;
impl IntoResponses for NotFound {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[&NOT_FOUND])
    }
}

/// `responses(...)`: 409, the object's state does not allow it.
pub(crate) struct Conflict;
impl IntoResponses for Conflict {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[&CONFLICT])
    }
}

/// `responses(...)`: 422, a query parameter or field out of range.
pub(crate) struct Invalid;
impl IntoResponses for Invalid {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[&INVALID])
    }
}

/// `responses(...)`: 503, the database is unreachable or busy (public routes that read it).
pub(crate) struct Unavailable;
impl IntoResponses for Unavailable {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        refs(&[&SERVICE_UNAVAILABLE])
    }
}

/// Adds the problem responses and the security schemes to the document's components.
struct Components;

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
                "A tenant's API key (`bw_…`), shown once when the operator creates the tenant. \
                 Each key is limited to `api.ingress_per_second` requests per second (429 above).",
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
