//! The OpenAPI document (`crates/api/src/openapi.rs`): the served copy, the committed copy
//! (`docs/openapi.json`) and the code agree; every route of the router is in it and it names no
//! route the router lacks; and what the schemathesis run (`scripts/schemathesis.sh`) found
//! stays fixed.

use breakwater_e2e::routes::served_routes;
use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet};

const REGENERATE: &str = "run `cargo run -p breakwater -- openapi > docs/openapi.json`";

/// The committed copy, as text.
fn committed() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("docs/openapi.json cannot be read ({e}): {REGENERATE}"))
}

/// The first line where `a` and `b` differ, for a failure message.
fn first_difference(a: &str, b: &str) -> String {
    for (n, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}: committed {x:?}, generated {y:?}", n + 1);
        }
    }
    format!(
        "one is a prefix of the other ({} and {} lines)",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn committed_copy_is_what_the_code_generates() {
    let generated = breakwater_api::openapi::json();
    let committed = committed();
    assert!(
        committed == generated,
        "docs/openapi.json differs from the OpenAPI document the code generates ({}): {REGENERATE}",
        first_difference(&committed, generated)
    );
}

/// Every operation has a unique `operationId`, a tag and a summary; every error response is a
/// problem (`application/problem+json`); every operation behind a key names its scheme; every
/// response link names an operation that exists.
#[test]
fn document_follows_the_house_rules() {
    let doc: Value = serde_json::from_str(breakwater_api::openapi::json()).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let responses = &doc["components"]["responses"];
    let schemes = doc["components"]["securitySchemes"].as_object().unwrap();
    for name in ["tenant_key", "operator_key", "metrics_token"] {
        assert_eq!(schemes[name]["scheme"], "bearer", "security scheme {name}");
    }
    let public: BTreeSet<&str> = [
        "/healthz",
        "/readyz",
        "/api/v1/openapi.json",
        "/admin",
        "/admin/admin.js",
        "/admin/admin.css",
        "/assets/common.js",
        "/assets/common.css",
        "/portal",
        "/portal/portal.js",
        "/portal/portal.css",
    ]
    .into();
    let mut ids = BTreeMap::new();
    let mut linked = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let route = format!("{} {path}", method.to_uppercase());
            let id = op["operationId"].as_str().unwrap_or_default();
            assert!(!id.is_empty(), "{route} has no operationId");
            if let Some(other) = ids.insert(id.to_string(), route.clone()) {
                panic!("{route} and {other} share the operationId {id}");
            }
            assert!(op["tags"][0].is_string(), "{route} has no tag");
            assert!(op["summary"].is_string(), "{route} has no summary");
            let security = op["security"].as_array();
            if public.contains(path.as_str()) {
                assert!(security.is_none(), "{route} is public but names a key");
            } else {
                assert!(
                    security.is_some_and(|s| !s.is_empty()),
                    "{route} names no security scheme"
                );
            }
            for (status, response) in op["responses"].as_object().unwrap() {
                let response = match response["$ref"].as_str() {
                    Some(r) => &responses[r.trim_start_matches("#/components/responses/")],
                    None => response,
                };
                assert!(
                    response.is_object(),
                    "{route} {status}: unknown response reference"
                );
                if !status.starts_with('2') {
                    assert!(
                        response["content"]["application/problem+json"].is_object(),
                        "{route} {status} is not a problem+json response: {response}"
                    );
                }
                if let Some(links) = response["links"].as_object() {
                    for (name, link) in links {
                        let target = link["operationId"].as_str();
                        assert!(
                            target.is_some(),
                            "{route} {status}: link {name} has no operationId: {link}"
                        );
                        linked.push((route.clone(), target.unwrap().to_string()));
                    }
                }
            }
        }
    }
    for (route, target) in linked {
        assert!(
            ids.contains_key(&target),
            "{route} links to {target}, which no operation is"
        );
    }
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn every_route_is_in_the_document_and_every_documented_route_is_served(pool: PgPool) {
    let app = TestApp::spawn(pool).await;

    // Served without a key, as the code generates it, and so as committed.
    let r = app
        .http
        .get(format!("{}/api/v1/openapi.json", app.api))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    let served = r.text().await.unwrap();
    assert!(
        served == breakwater_api::openapi::json(),
        "GET /api/v1/openapi.json is not the generated document"
    );

    let doc: Value = serde_json::from_str(&served).unwrap();
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let served = served_routes(&app, &["GET", "POST", "PUT", "PATCH", "DELETE"]).await;

    let undocumented: Vec<String> = served
        .difference(&documented)
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    let unserved: Vec<String> = documented
        .difference(&served)
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert!(
        undocumented.is_empty(),
        "routes served but missing from the OpenAPI document: {undocumented:?}. Annotate each \
         handler with #[utoipa::path(...)] and add it to `paths(...)` in \
         crates/api/src/openapi.rs (its module doc shows how), then {REGENERATE}"
    );
    assert!(
        unserved.is_empty(),
        "routes in the OpenAPI document that the router does not serve (it answers 405): \
         {unserved:?}. Fix the handler's #[utoipa::path] method or path, then {REGENERATE}"
    );
    app.stop().await;
}

/// What the schemathesis run found, kept fixed.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_json_array_is_never_read_as_an_object(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("arrays", "default").await;

    // serde reads a struct from an array of its fields in order: `[null, null]` would have reset
    // both circuit defaults (200). Every body is an object; anything else is a 422.
    let (status, before) = app
        .get("/api/v1/admin/circuit-defaults", OPERATOR_KEY)
        .await;
    assert_eq!(status, 200);
    let r = app
        .http
        .patch(format!("{}/api/v1/admin/circuit-defaults", app.api))
        .bearer_auth(OPERATOR_KEY)
        .json(&json!([3, 1000]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "invalid_body", "{body}");
    assert_eq!(
        app.get("/api/v1/admin/circuit-defaults", OPERATOR_KEY)
            .await
            .1,
        before,
        "a refused body changed the defaults"
    );

    for body in [json!(["https://example.com/x"]), json!("x"), json!(7)] {
        let (status, problem) = app.post("/api/v1/channels", &key, &body).await;
        assert_eq!(status, 422, "{body}: {problem}");
        assert_eq!(problem["code"], "invalid_body", "{body}: {problem}");
    }

    // Nor inside a body: a batch item spelled as an array of its fields.
    let channel = app.channel(&key, "ok").await;
    let batch = format!("/api/v1/channels/{channel}/deliveries/batch");
    let (status, problem) = app
        .post(
            &batch,
            &key,
            &json!({"deliveries": [["a.b", {"n": 1}, null]]}),
        )
        .await;
    assert_eq!(status, 422, "{problem}");
    assert_eq!(problem["code"], "invalid_body", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("deliveries[0]"),
        "the detail names the item: {problem}"
    );
    let (status, accepted) = app
        .post(
            &batch,
            &key,
            &json!({"deliveries": [{"event_type": "a.b", "payload": {"n": 1}}]}),
        )
        .await;
    assert_eq!(status, 202, "{accepted}");
    app.stop().await;
}
