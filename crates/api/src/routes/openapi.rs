//! The API's OpenAPI 3.1 document, generated from the handlers' own annotations so that it
//! cannot drift from the code.
//!
//! - Served at `GET /api/v1/openapi.json` (unauthenticated; built once per process: [`json`]),
//!   by the route in this module (beside the routes it describes, so no module above `routes`
//!   needs them and none of them needs it).
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
//!    responses of [`crate::responses`] that apply — `TenantAuth` or `OperatorAuth` for a route
//!    behind a key, `BadRequest` when it has a path id or a query string, `JsonBody` when it
//!    takes a JSON body, and `NotFound`, `Conflict`, `Invalid` as the handler can answer
//!    them. Request and response types derive `utoipa::ToSchema` (query structs
//!    `utoipa::IntoParams`); give a schema a distinct name with `#[schema(as = …)]` when its Rust
//!    name is generic (`Page`, `ListQuery`).
//! 2. Add the handler to `paths(...)` of [`ApiDoc`] below.
//! 3. Regenerate the committed copy: `cargo run -p breakwater -- openapi > docs/openapi.json`.
//!
//! The route test names any route the document lacks; schemathesis fails on any status, body or
//! content type the document does not describe.

use std::sync::LazyLock;
use utoipa::openapi::{Ref, RefOr};
use utoipa::{Modify, OpenApi};

use crate::routes;
use crate::AppState;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::responses::Components;

/// The route of the document: `GET /api/v1/openapi.json`.
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
    ([(header::CONTENT_TYPE, "application/json")], json())
}

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
        routes::assets::script,
        routes::assets::stylesheet,
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
        routes::channels::manual::pause,
        routes::channels::manual::resume,
        routes::channels::manual::replay_window,
        routes::channels::manual::recover,
        routes::channels::enqueue::enqueue_one,
        routes::channels::enqueue::enqueue_batch,
        routes::channels::filter::test_filter,
        routes::channels::explain::explain_circuit,
        routes::deliveries::read,
        routes::deliveries::replay,
        routes::deliveries::resend,
        routes::deliveries::search,
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
        routes::portal_sessions::self_open,
        routes::portal_sessions::self_revoke,
        routes::portal_sessions::current,
        routes::portal_sessions::operator_open,
        routes::portal_sessions::operator_revoke,
        routes::portal::page,
        routes::portal::script,
        routes::portal::stylesheet,
        routes::event_types::create,
        routes::event_types::list,
        routes::event_types::read,
        routes::event_types::update,
        routes::event_types::remove,
        routes::event_types::operator_list,
        routes::event_types::operator_read,
    ),
    components(schemas(
        crate::error::Problem,
        breakwater_core::deliveries::DeliverySummary,
        breakwater_core::keys::ApiKey,
        breakwater_core::quotas::Quota,
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
        (name = "event types", description = "The calling tenant's event-type catalog: names, \
            JSON Schemas checked on every enqueue and message, examples, and the channels that \
            take each type."),
        (name = "tenant", description = "The calling tenant itself."),
        (name = "audit", description = "The tenant's audit log."),
        (name = "tenants", description = "Operator: create and manage tenants."),
        (name = "operator", description = "Operator: every tenant's channels and breakers, the \
            cluster-wide circuit defaults, the queues and the whole audit log."),
        (name = "health", description = "Liveness and readiness (no key)."),
        (name = "observability", description = "Prometheus metrics and this document."),
        (name = "portal", description = "Tenant portal sessions: short-lived, scoped \
            credentials (`manage` or `read`) for the tenant's own users, opened by the tenant or \
            the operator; the session's token is a tenant credential on the portal's routes."),
        (name = "portal page", description = "The tenant portal page (HTML, script and style; \
            no key to load it, the page reads its session token from the URL's fragment)."),
        (name = "admin page", description = "The operator's live page (HTML, script and style; \
            no key to load it, the page asks for the operator key)."),
        (name = "pages", description = "The script and style the admin page and the portal \
            share (no key to load them)."),
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
