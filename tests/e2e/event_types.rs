//! The event-type catalog (`/api/v1/event-types`): CRUD and paging, schemas checked on enqueue
//! and on fan-out, unknown types refused when the tenant says so, prefix wildcards in channel
//! filters, and the channels each type reaches.

use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::time::Duration;
use uuid::Uuid;

/// Every test's set-up: a service on `pool` and one tenant, `acme`: (app, tenant id, key).
async fn acme(pool: &PgPool) -> (TestApp, Uuid, String) {
    let app = TestApp::spawn(pool.clone()).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    (app, tenant, key)
}

/// A channel of `key`'s tenant, delivering to the receiver's endpoint `name`, that takes
/// `event_types` (exact names or wildcards).
async fn subscribed(app: &TestApp, key: &str, name: &str, event_types: Value) -> Uuid {
    app.channel_with(key, name, json!({ "event_types": event_types }))
        .await
}

/// `POST path` (an enqueue or `/api/v1/messages`) of one `{event_type, payload}`.
async fn send(
    app: &TestApp,
    key: &str,
    path: &str,
    event_type: &str,
    payload: Value,
) -> (u16, Value) {
    app.post(
        path,
        key,
        &json!({ "event_type": event_type, "payload": payload }),
    )
    .await
}

/// A realistic schema for `invoice.paid`.
fn invoice_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["invoice_id", "amount", "currency"],
        "properties": {
            "invoice_id": {"type": "string", "minLength": 1},
            "amount": {"type": "integer", "minimum": 0},
            "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "lines": {"type": "array", "items": {
                "type": "object", "required": ["sku"],
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}
            }}
        }
    })
}

fn good_invoice() -> Value {
    json!({"invoice_id": "in_1", "amount": 1200, "currency": "EUR", "lines": [{"sku": "a", "qty": 1}]})
}

/// Registers `name` with `schema` (and no example) for the tenant of `key`.
async fn register(app: &TestApp, key: &str, name: &str, schema: Value) -> Value {
    let (s, v) = app
        .post(
            "/api/v1/event-types",
            key,
            &json!({ "name": name, "schema": schema }),
        )
        .await;
    assert_eq!(s, 201, "register {name}: {v}");
    v
}

/// The pointers of a `schema_violation` problem's `errors`.
fn pointers(v: &Value) -> BTreeSet<String> {
    v["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors in {v}"))
        .iter()
        .map(|e| e["pointer"].as_str().unwrap().to_string())
        .collect()
}

/// Audit rows of the catalog (`event_type.*`) of `tenant`.
async fn catalog_audits(pool: &PgPool, tenant: Uuid) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT action FROM audit_log WHERE tenant_id = $1 AND action LIKE 'event_type.%' ORDER BY id",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_catalog_is_crud_paged_by_name_and_audited_once_per_change(pool: PgPool) {
    let (app, tenant, key) = acme(&pool).await;
    for name in ["order.created", "invoice.paid", "invoice.voided"] {
        register(&app, &key, name, json!({"type": "object"})).await;
    }
    // The same name twice: 409.
    let (s, v) = app
        .post(
            "/api/v1/event-types",
            &key,
            &json!({ "name": "invoice.paid" }),
        )
        .await;
    assert_eq!((s, v["code"].as_str()), (409, Some("conflict")), "{v}");

    // Paged by name, bytewise.
    let (s, p1) = app.get("/api/v1/event-types?limit=2", &key).await;
    assert_eq!(s, 200, "{p1}");
    let names = |p: &Value| -> Vec<String> {
        p["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&p1), ["invoice.paid", "invoice.voided"]);
    let cursor = p1["next_cursor"].as_str().expect("a next page").to_string();
    let (_, p2) = app
        .get(&format!("/api/v1/event-types?limit=2&after={cursor}"), &key)
        .await;
    assert_eq!(names(&p2), ["order.created"]);
    assert_eq!(p2["next_cursor"], Value::Null);

    // Read, patch, delete.
    let (s, e) = app.get("/api/v1/event-types/invoice.paid", &key).await;
    assert_eq!(s, 200, "{e}");
    assert_eq!(e["schema"], json!({"type": "object"}));
    assert_eq!(e["deprecated"], false);
    let (s, e) = app
        .patch(
            "/api/v1/event-types/invoice.paid",
            &key,
            &json!({ "description": "An invoice was paid.", "deprecated": true, "example": {"a": 1} }),
        )
        .await;
    assert_eq!(s, 200, "{e}");
    assert_eq!(
        (&e["description"], &e["deprecated"], &e["example"]),
        (
            &json!("An invoice was paid."),
            &json!(true),
            &json!({"a": 1})
        )
    );
    // A patch that changes nothing is not audited.
    let (s, _) = app
        .patch(
            "/api/v1/event-types/invoice.paid",
            &key,
            &json!({ "deprecated": true }),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _, _) = app.delete("/api/v1/event-types/invoice.voided", &key).await;
    assert_eq!(s, 204);
    let (s, v) = app.get("/api/v1/event-types/invoice.voided", &key).await;
    assert_eq!((s, v["code"].as_str()), (404, Some("not_found")));
    let (s, _, _) = app.delete("/api/v1/event-types/invoice.voided", &key).await;
    assert_eq!(s, 404);
    // A hard delete: the name can be registered again.
    register(&app, &key, "invoice.voided", json!(true)).await;

    assert_eq!(
        catalog_audits(&pool, tenant).await,
        [
            "event_type.created",
            "event_type.created",
            "event_type.created",
            "event_type.updated",
            "event_type.deleted",
            "event_type.created"
        ]
    );

    // The operator reads the tenant's catalog; a tenant key cannot use the operator's routes.
    let (s, v) = app
        .get(
            &format!("/api/v1/tenants/{tenant}/event-types"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(names(&v).len(), 3);
    let (s, v) = app
        .get(
            &format!("/api/v1/tenants/{tenant}/event-types/invoice.paid"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(
        (s, &v["description"]),
        (200, &json!("An invoice was paid."))
    );
    let (s, _) = app
        .get(&format!("/api/v1/tenants/{tenant}/event-types"), &key)
        .await;
    assert_eq!(s, 403);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn bad_names_schemas_and_examples_are_422_naming_the_field(pool: PgPool) {
    let (app, tenant, key) = acme(&pool).await;
    let post = |body: Value| {
        let app = &app;
        let key = key.clone();
        async move { app.post("/api/v1/event-types", &key, &body).await }
    };
    for bad in ["", "a..b", ".a", "a.", "invoice.*", "a b", &"x".repeat(129)] {
        let (s, v) = post(json!({ "name": bad })).await;
        assert_eq!(
            (s, v["field"].as_str()),
            (422, Some("name")),
            "{bad:?}: {v}"
        );
    }
    for bad in [
        json!(3),
        json!({"type": "nope"}),
        json!({"$schema": "http://json-schema.org/draft-07/schema#"}),
        json!({"$ref": "https://example.com/remote.json"}),
    ] {
        let (s, v) = post(json!({ "name": "a.b", "schema": bad })).await;
        assert_eq!((s, v["field"].as_str()), (422, Some("schema")), "{v}");
    }
    // An example that fails the schema: 422 schema_violation on example, with pointers.
    let (s, v) = post(json!({
        "name": "invoice.paid",
        "schema": invoice_schema(),
        "example": {"invoice_id": "in_1", "amount": "12", "currency": "euro"},
    }))
    .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(
        (v["code"].as_str(), v["field"].as_str()),
        (Some("schema_violation"), Some("example"))
    );
    assert_eq!(
        pointers(&v),
        BTreeSet::from(["/amount".to_string(), "/currency".to_string()])
    );
    // A valid example; then a new schema the kept example fails is refused on example.
    let (s, v) = post(json!({
        "name": "invoice.paid", "schema": invoice_schema(), "example": good_invoice(),
    }))
    .await;
    assert_eq!(s, 201, "{v}");
    let (s, v) = app
        .patch(
            "/api/v1/event-types/invoice.paid",
            &key,
            &json!({ "schema": {"type": "object", "required": ["customer"]} }),
        )
        .await;
    assert_eq!((s, v["field"].as_str()), (422, Some("example")), "{v}");
    assert_eq!(pointers(&v), BTreeSet::from([String::new()]));
    // Nothing refused was stored or audited.
    assert_eq!(catalog_audits(&pool, tenant).await, ["event_type.created"]);
    let (_, e) = app.get("/api/v1/event-types/invoice.paid", &key).await;
    assert_eq!(e["schema"], invoice_schema());
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_schema_is_checked_on_enqueue_and_on_fan_out(pool: PgPool) {
    let (app, _, key) = acme(&pool).await;
    let billing = subscribed(&app, &key, "billing", json!(["invoice.*"])).await;
    register(&app, &key, "invoice.paid", invoice_schema()).await;
    let bad = json!({"invoice_id": "", "amount": -1, "currency": "EUR", "lines": [{"qty": "x"}]});
    let enqueue = format!("/api/v1/channels/{billing}/deliveries");

    // One delivery: 422 naming each failing part by JSON pointer.
    let (s, v) = send(&app, &key, &enqueue, "invoice.paid", bad.clone()).await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["code"], "schema_violation");
    assert_eq!(v["field"], "payload");
    assert_eq!(
        pointers(&v),
        BTreeSet::from(["/invoice_id", "/amount", "/lines/0", "/lines/0/qty"].map(String::from)),
        "{v}"
    );
    // A batch names the item.
    let (s, v) = app
        .post(
            &format!("{enqueue}/batch"),
            &key,
            &json!({ "deliveries": [
                { "event_type": "invoice.paid", "payload": good_invoice() },
                { "event_type": "invoice.paid", "payload": {"amount": 1} },
            ]}),
        )
        .await;
    assert_eq!(s, 422, "{v}");
    assert_eq!(v["field"], "deliveries[1].payload", "{v}");
    // A message: 422 too, before any channel is touched.
    let (s, v) = send(&app, &key, "/api/v1/messages", "invoice.paid", bad).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (422, Some("schema_violation")),
        "{v}"
    );
    assert!(pointers(&v).contains("/amount"), "{v}");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM deliveries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 0, "nothing refused was enqueued");

    // Valid ones go through and are delivered: one direct, one fanned out.
    let (s, v) = send(&app, &key, &enqueue, "invoice.paid", good_invoice()).await;
    assert_eq!(s, 202, "{v}");
    let (s, v) = send(
        &app,
        &key,
        "/api/v1/messages",
        "invoice.paid",
        good_invoice(),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["deliveries"].as_array().unwrap().len(), 1, "{v}");
    app.wait_received("billing", 2, Duration::from_secs(10))
        .await;
    for r in app.receiver.received("billing") {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["type"], "invoice.paid");
        assert_eq!(body["data"], good_invoice());
        assert_eq!(r.signature_ok, Some(true));
    }

    // The schema changes: the next enqueue checks the new one (no stale compiled schema).
    let (s, v) = app
        .patch(
            "/api/v1/event-types/invoice.paid",
            &key,
            &json!({ "schema": {"type": "object", "required": ["note"]} }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = send(&app, &key, &enqueue, "invoice.paid", good_invoice()).await;
    assert_eq!(
        (s, v["code"].as_str()),
        (422, Some("schema_violation")),
        "{v}"
    );
    let (s, v) = send(
        &app,
        &key,
        &enqueue,
        "invoice.paid",
        json!({"note": "ok", "amount": "x"}),
    )
    .await;
    assert_eq!(s, 202, "{v}");
    // Deleted from the catalog: the type is unknown again, accepted by default.
    let (s, _, _) = app.delete("/api/v1/event-types/invoice.paid", &key).await;
    assert_eq!(s, 204);
    let (s, v) = send(&app, &key, &enqueue, "invoice.paid", json!(1)).await;
    assert_eq!(s, 202, "{v}");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn unknown_types_are_refused_only_when_the_tenant_says_so(pool: PgPool) {
    let (app, tenant, key) = acme(&pool).await;
    let channel = app.channel(&key, "ep").await;
    let enqueue = format!("/api/v1/channels/{channel}/deliveries");
    let event = |t: &str| json!({ "event_type": t, "payload": {"n": 1} });

    // Default: accepted, catalog or not.
    let (_, t) = app.get("/api/v1/tenant", &key).await;
    assert_eq!(t["reject_unknown_event_types"], false, "{t}");
    assert_eq!(app.post(&enqueue, &key, &event("nope.x")).await.0, 202);

    // The tenant turns refusal on: an unknown type is 422 on event_type, a known one passes.
    let (s, t) = app
        .patch(
            "/api/v1/tenant",
            &key,
            &json!({ "reject_unknown_event_types": true }),
        )
        .await;
    assert_eq!(
        (s, &t["reject_unknown_event_types"]),
        (200, &json!(true)),
        "{t}"
    );
    let (s, v) = app.post(&enqueue, &key, &event("nope.x")).await;
    assert_eq!((s, v["field"].as_str()), (422, Some("event_type")), "{v}");
    let (s, v) = app.post("/api/v1/messages", &key, &event("nope.x")).await;
    assert_eq!((s, v["field"].as_str()), (422, Some("event_type")), "{v}");
    register(&app, &key, "known.x", json!(true)).await;
    assert_eq!(app.post(&enqueue, &key, &event("known.x")).await.0, 202);
    let (s, v) = app.post("/api/v1/messages", &key, &event("known.x")).await;
    assert_eq!(
        (s, v["deliveries"].as_array().map(Vec::len)),
        (202, Some(1)),
        "{v}"
    );

    // The operator turns it off again on the tenant.
    let (s, t) = app
        .patch(
            &format!("/api/v1/tenants/{tenant}"),
            OPERATOR_KEY,
            &json!({ "reject_unknown_event_types": false }),
        )
        .await;
    assert_eq!(
        (s, &t["reject_unknown_event_types"]),
        (200, &json!(false)),
        "{t}"
    );
    assert_eq!(app.post(&enqueue, &key, &event("nope.x")).await.0, 202);
    let changes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE tenant_id = $1 AND action = 'tenant.updated'
           AND details -> 'new' ? 'reject_unknown_event_types'",
    )
    .bind(tenant)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(changes, 2, "each change of the setting is audited once");
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_wildcard_takes_the_types_under_its_prefix_only(pool: PgPool) {
    let (app, _, key) = acme(&pool).await;
    let wild = subscribed(&app, &key, "wild", json!(["invoice.*"])).await;
    let exact = subscribed(&app, &key, "exact", json!(["invoice"])).await;
    let deliveries_of = |v: &Value| -> BTreeSet<String> {
        v["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["channel_id"].as_str().unwrap().to_string())
            .collect()
    };
    for (t, want) in [
        ("invoice.paid", vec![wild]),
        ("invoice.line.added", vec![wild]),
        ("invoices.x", vec![]),
        ("invoice", vec![exact]),
        ("invoice.", vec![]),
    ] {
        let (s, v) = app
            .post(
                "/api/v1/messages",
                &key,
                &json!({ "event_type": t, "payload": {"t": t} }),
            )
            .await;
        assert_eq!(s, 202, "{t}: {v}");
        let want: BTreeSet<String> = want.iter().map(Uuid::to_string).collect();
        assert_eq!(deliveries_of(&v), want, "{t}: {v}");
    }
    app.wait_received("wild", 2, Duration::from_secs(10)).await;
    let types: BTreeSet<String> = app
        .receiver
        .received("wild")
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body).unwrap()["data"]["t"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        types,
        BTreeSet::from(["invoice.paid".to_string(), "invoice.line.added".to_string()])
    );

    // Bad patterns are refused on create and on patch, naming event_types.
    for bad in ["invoice*", "*", ".*", "invoice.*.paid", "in*voice"] {
        let (s, v) = app
            .post(
                "/api/v1/channels",
                &key,
                &json!({ "url": app.receiver.url("x"), "event_types": [bad] }),
            )
            .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (422, Some("event_types")),
            "{bad}: {v}"
        );
        let (s, v) = app
            .patch_channel(&key, wild, json!({ "event_types": [bad] }))
            .await;
        assert_eq!(
            (s, v["field"].as_str()),
            (422, Some("event_types")),
            "{bad}: {v}"
        );
    }
    let (s, v) = app
        .patch_channel(
            &key,
            exact,
            json!({ "event_types": ["order.*", "invoice"] }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["event_types"], json!(["invoice", "order.*"]));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_catalog_shows_the_channels_that_take_a_type(pool: PgPool) {
    let (app, _, key) = acme(&pool).await;
    let (_, other_key) = app.tenant("globex", "default").await;
    let wild = app
        .named_channel(&key, "wild", json!({ "event_types": ["invoice.*"] }))
        .await;
    let exact = app
        .named_channel(
            &key,
            "exact",
            json!({ "event_types": ["invoice.paid", "invoice.*"] }),
        )
        .await;
    let all = app.named_channel(&key, "all", json!({})).await;
    app.named_channel(&key, "orders", json!({ "event_types": ["order.*"] }))
        .await;
    let gone = app
        .named_channel(&key, "gone", json!({ "event_types": ["invoice.paid"] }))
        .await;
    let (s, _, _) = app.delete(&format!("/api/v1/channels/{gone}"), &key).await;
    assert_eq!(s, 204);
    // Another tenant's channel that takes everything is never shown.
    app.named_channel(&other_key, "foreign", json!({})).await;
    register(&app, &key, "invoice.paid", json!({"type": "object"})).await;

    let (s, v) = app.get("/api/v1/event-types/invoice.paid", &key).await;
    assert_eq!(s, 200, "{v}");
    let mut got: Vec<(String, Value, Value)> = v["channels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["name"].clone(),
                c["matched_by"].clone(),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    let mut want = vec![
        (wild.to_string(), json!("wild"), json!("invoice.*")),
        (exact.to_string(), json!("exact"), json!("invoice.paid")),
        (all.to_string(), json!("all"), Value::Null),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want, "{v}");
    assert_eq!(v["channels_truncated"], false);
    app.stop().await;
}
