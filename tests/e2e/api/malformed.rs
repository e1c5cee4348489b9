//! Malformed requests: bad JSON, non-UUID ids, text the database cannot store, and values
//! outside the documented forms are refused with a problem, never a 500.

use super::{channel_row, count, enqueue_path, event};
use breakwater_e2e::http::{assert_invalid, assert_ok, assert_problem, get, post, post_raw, send};
use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn malformed_json_and_non_uuid_ids_are_400(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;

    // Bodies that are not JSON, including ones where a shape error (wrong type, unknown
    // field) comes before the syntax error: syntax is judged first, so these are all 400.
    for body in [
        "{not json",
        "",
        "{",
        "nul",
        "{'url': 1}",
        "{\"url\": ",
        "[1 2]",
        "{\"nope\": 1,",
    ] {
        let b = assert_problem(post_raw(&app, "/api/v1/channels", &key, body).await, 400).await;
        assert_eq!(b["code"], "malformed_json", "{body:?}: {b}");
        assert_problem(
            post_raw(&app, &enqueue_path(channel), &key, body).await,
            400,
        )
        .await;
        assert_problem(
            post_raw(
                &app,
                &format!("{}/batch", enqueue_path(channel)),
                &key,
                body,
            )
            .await,
            400,
        )
        .await;
        assert_problem(
            post_raw(&app, "/api/v1/tenants", OPERATOR_KEY, body).await,
            400,
        )
        .await;
    }

    // A body that is not declared as JSON.
    let resp = send(
        app.http
            .post(format!("{}{}", app.api, enqueue_path(channel)))
            .bearer_auth(&key)
            .header("content-type", "text/plain")
            .body(event("a.b").to_string()),
    )
    .await;
    assert_problem(resp, 415).await;
    // A body in a content coding (here gzip, which the service does not decode) is refused as
    // 415, and the answer says which coding is accepted (RFC 9110 §12.5.3, §15.5.16).
    for (coding, status) in [("gzip", 415), ("identity, br", 415), ("identity", 201)] {
        let resp = send(
            app.http
                .post(format!("{}/api/v1/channels", app.api))
                .bearer_auth(&key)
                .header("content-type", "application/json")
                .header("content-encoding", coding)
                .body(json!({ "url": app.receiver.url("z") }).to_string()),
        )
        .await;
        if status == 201 {
            assert_ok(resp, 201).await;
            continue;
        }
        assert_eq!(
            resp.headers().get("accept-encoding").map(|v| v.as_bytes()),
            Some(&b"identity"[..]),
            "{coding}"
        );
        let b = assert_problem(resp, status).await;
        assert_eq!(b["code"], "unsupported_media_type", "{coding}: {b}");
    }

    for path in [
        "/api/v1/channels/not-a-uuid".to_string(),
        "/api/v1/channels/123".to_string(),
        "/api/v1/deliveries/not-a-uuid".to_string(),
        format!("/api/v1/deliveries/{}x", Uuid::now_v7()),
    ] {
        let b = assert_problem(get(&app, &path, Some(&key)).await, 400).await;
        assert_eq!(b["code"], "invalid_path", "{path}: {b}");
        assert_eq!(
            b["field"], "id",
            "the problem names the path parameter: {b}"
        );
        // In words that cannot be read as a complaint about the channel's URL.
        let detail = b["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("the request path's `id` is not a UUID")
                && !detail.contains("Invalid URL"),
            "{path}: {b}"
        );
    }
    let revoke = format!("{}/api/v1/tenants/{}/keys/nope", app.api, Uuid::now_v7());
    let b = assert_problem(
        send(app.http.delete(revoke).bearer_auth(OPERATOR_KEY)).await,
        400,
    )
    .await;
    assert_eq!(b["field"], "key_id", "{b}");
    // A huge bad id is not echoed back whole.
    let huge = "a".repeat(20_000);
    let b = assert_problem(
        get(&app, &format!("/api/v1/channels/{huge}"), Some(&key)).await,
        400,
    )
    .await;
    let detail = b["detail"].as_str().unwrap();
    assert!(detail.chars().count() < 300, "{} characters", detail.len());
    assert_eq!(b["field"], "id");
    // A host key is not a UUID: its refusal does not say it should be one.
    let b = assert_problem(
        get(&app, "/api/v1/admin/hosts/a%ffb", Some(OPERATOR_KEY)).await,
        400,
    )
    .await;
    assert_eq!(b["field"], "host", "{b}");
    assert!(!b["detail"].as_str().unwrap().contains("UUID"), "{b}");
    // A query string that does not decode names its parameter too: bytes that are not UTF-8
    // once percent-decoded are refused, not replaced by U+FFFD.
    for (path, field) in [
        ("/api/v1/admin/channels?state=op%FFen", "state"),
        ("/api/v1/admin/channels?tenant+id=%C3%28", "tenant id"),
    ] {
        let b = assert_problem(get(&app, path, Some(OPERATOR_KEY)).await, 400).await;
        assert_eq!(b["code"], "invalid_query", "{path}: {b}");
        assert_eq!(b["field"], field, "{path}: {b}");
    }
    // A parameter the route does not take is refused, not ignored: a misspelt filter would
    // otherwise list everything. The refusal names it and the parameters the route takes.
    for (path, auth, field, takes) in [
        (
            "/api/v1/admin/channels?stauts=open".to_string(),
            OPERATOR_KEY,
            "stauts",
            "state",
        ),
        (
            format!("/api/v1/channels/{channel}/deliveries?stauts=dead&limit=5"),
            key.as_str(),
            "stauts",
            "status, event_type, since, until, after, limit",
        ),
        (
            "/api/v1/channels?limit=5&page=2".to_string(),
            key.as_str(),
            "page",
            "after, limit",
        ),
    ] {
        let b = assert_problem(get(&app, &path, Some(auth)).await, 400).await;
        assert_eq!(b["code"], "invalid_query", "{path}: {b}");
        assert_eq!(b["field"], field, "{path}: {b}");
        let detail = b["detail"].as_str().unwrap();
        assert!(detail.contains(takes), "{path}: {detail}");
    }
    // The parameters a route takes still work, together.
    let (status, _) = app
        .get(
            &format!("/api/v1/channels/{channel}/deliveries?status=dead&event_type=x&limit=5"),
            &key,
        )
        .await;
    assert_eq!(status, 200);
    // A number of the wrong type is said in plain words (not serde's `i64`), with its unit.
    let resp = send(
        app.http
            .patch(format!("{}/api/v1/channels/{channel}", app.api))
            .bearer_auth(&key)
            .json(&json!({ "cooldown_ms": "30s" })),
    )
    .await;
    let b = assert_problem(resp, 422).await;
    assert_eq!(
        (&b["code"], &b["field"]),
        (&json!("invalid_body"), &json!("cooldown_ms")),
        "{b}"
    );
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.contains("expected an integer (milliseconds)") && !detail.contains("i64"),
        "{b}"
    );
    // And a body value of the wrong type, by its path in the body.
    let wrong = json!({ "deliveries": [event("a.b"), { "event_type": 7, "payload": {} }] });
    let b = assert_problem(
        post(
            &app,
            &format!("{}/batch", enqueue_path(channel)),
            Some(&key),
            &wrong,
        )
        .await,
        422,
    )
    .await;
    assert_eq!(b["code"], "invalid_body", "{b}");
    assert_eq!(b["field"], "deliveries[1].event_type", "{b}");
    // A missing or repeated field is named too, at the top or in an item, and so is a repeated
    // query parameter.
    for (body, field) in [
        (r#"{"event_type":"a.b"}"#, "payload"),
        (
            r#"{"event_type":"a","payload":{},"event_type":"b"}"#,
            "event_type",
        ),
    ] {
        let resp = post_raw(&app, &enqueue_path(channel), &key, body).await;
        let b = assert_problem(resp, 422).await;
        assert_eq!(b["field"], field, "{body}: {b}");
    }
    let item = json!({ "deliveries": [{ "event_type": "a.b" }] });
    let b = assert_problem(
        post(
            &app,
            &format!("{}/batch", enqueue_path(channel)),
            Some(&key),
            &item,
        )
        .await,
        422,
    )
    .await;
    assert_eq!(b["field"], "deliveries[0].payload", "{b}");
    let b = assert_problem(
        get(&app, "/api/v1/channels?limit=5&limit=6", Some(&key)).await,
        400,
    )
    .await;
    assert_eq!(b["field"], "limit", "{b}");
    let b = assert_problem(
        post(
            &app,
            "/api/v1/channels/nope/deliveries",
            Some(&key),
            &event("a.b"),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(b["code"], "invalid_path");
    let batch = json!({ "deliveries": [event("a.b")] });
    assert_problem(
        post(
            &app,
            "/api/v1/channels/nope/deliveries/batch",
            Some(&key),
            &batch,
        )
        .await,
        400,
    )
    .await;

    assert_eq!(
        count(&app.pool, "channels").await,
        2,
        "one: the identity-coded body"
    );
    assert_eq!(count(&app.pool, "deliveries").await, 0);
    assert_eq!(count(&app.pool, "tenants").await, 1);
    app.stop().await;
}

/// Enqueues a delivery of `payload` to `channel` (202) and returns the payload its delivery
/// reads back (200).
async fn stored_payload(app: &TestApp, key: &str, channel: Uuid, payload: &Value) -> Value {
    let body = json!({ "event_type": "a.b", "payload": payload });
    let accepted = assert_ok(
        post(app, &enqueue_path(channel), Some(key), &body).await,
        202,
    )
    .await;
    let id = accepted["id"].as_str().unwrap();
    let read = assert_ok(
        get(app, &format!("/api/v1/deliveries/{id}"), Some(key)).await,
        200,
    )
    .await;
    read["payload"].clone()
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn text_the_database_cannot_store_is_refused_not_a_500(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let url = app.receiver.url("nul");

    // Postgres text cannot hold U+0000: names, event types and idempotency keys with it are
    // refused. (A payload is stored as the JSON text itself, where U+0000 is the escape
    // `\u0000`, so payloads carrying it are accepted and delivered exactly; see below.)
    let requests = [
        post(&app, "/api/v1/tenants", Some(OPERATOR_KEY), &json!({ "name": "a\u{0}b" })).await,
        post(&app, "/api/v1/channels", Some(&key), &json!({ "url": url, "name": "a\u{0}b" })).await,
        post(&app, &enqueue_path(channel), Some(&key), &json!({ "event_type": "a\u{0}b", "payload": {} })).await,
        post(
            &app,
            &format!("{}/batch", enqueue_path(channel)),
            Some(&key),
            &json!({ "deliveries": [{ "event_type": "a.b", "payload": {}, "idempotency_key": "k\u{0}" }] }),
        )
        .await,
    ];
    for resp in requests {
        let body = assert_problem(resp, 422).await;
        assert_ne!(body["code"], "internal", "{body}");
    }
    assert_eq!(count(&app.pool, "tenants").await, 1);
    assert_eq!(count(&app.pool, "channels").await, 1);
    assert_eq!(count(&app.pool, "deliveries").await, 0);

    // Payloads carrying U+0000 (as JSON escapes) are kept exactly.
    for payload in [
        json!({ "s": "a\u{0}b" }),
        json!({ "a\u{0}b": 1 }),
        json!(["\u{0}"]),
    ] {
        assert_eq!(stored_payload(&app, &key, channel, &payload).await, payload);
    }

    // A backslash-u sequence spelled out in a string is ordinary text and is accepted.
    let ok = json!({ "s": "\\u0000" });
    assert_eq!(stored_payload(&app, &key, channel, &ok).await, ok);
    app.stop().await;
}

/// A bad value of a query parameter a route takes is a 422 `invalid_field` naming it, on every
/// route alike (an id filter that is not a UUID was a 400 with serde's words on the audit logs
/// and the operator's channel list); a query string wrong as a whole (a parameter given twice,
/// one the route does not take) is a 400 `invalid_query` naming the parameter.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn bad_query_values_are_422_and_a_repeated_parameter_400_naming_it(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;

    for (path, auth, field) in [
        (
            "/api/v1/admin/channels?tenant_id=nope",
            OPERATOR_KEY,
            "tenant_id",
        ),
        (
            "/api/v1/admin/channels?state=open&tenant_id=1",
            OPERATOR_KEY,
            "tenant_id",
        ),
        (
            "/api/v1/admin/audit?tenant_id=nope",
            OPERATOR_KEY,
            "tenant_id",
        ),
        (
            "/api/v1/admin/audit?channel_id=nope",
            OPERATOR_KEY,
            "channel_id",
        ),
        ("/api/v1/audit?channel_id=nope", key.as_str(), "channel_id"),
        (
            "/api/v1/deliveries?channel_id=nope",
            key.as_str(),
            "channel_id",
        ),
        ("/api/v1/audit?limit=0", key.as_str(), "limit"),
    ] {
        let b = assert_invalid(get(&app, path, Some(auth)).await, field).await;
        assert_eq!(b["code"], "invalid_field", "{path}: {b}");
        let detail = b["detail"].as_str().unwrap();
        assert!(
            !detail.contains("deserialize") && !detail.contains("UUID parsing"),
            "{path}: {detail}"
        );
    }
    let repeated = [
        ("/api/v1/channels?limit=5&limit=6".to_string(), "limit"),
        (
            "/api/v1/deliveries?status=dead&status=failed".to_string(),
            "status",
        ),
        (
            format!("/api/v1/audit?channel_id={channel}&channel_id={channel}"),
            "channel_id",
        ),
    ];
    for (path, field) in repeated {
        let b = assert_problem(get(&app, &path, Some(&key)).await, 400).await;
        assert_eq!(
            (&b["code"], &b["field"]),
            (&json!("invalid_query"), &json!(field)),
            "{path}: {b}"
        );
        assert!(
            b["detail"].as_str().unwrap().contains("more than once"),
            "{path}: {b}"
        );
    }
    // The tenant's audit log does not take `tenant_id` (its tenant is the key's), as the OpenAPI
    // document says: even its own id is refused as a parameter the route does not take.
    let b = assert_problem(
        get(
            &app,
            &format!("/api/v1/audit?tenant_id={tenant}"),
            Some(&key),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(
        (&b["code"], &b["field"]),
        (&json!("invalid_query"), &json!("tenant_id")),
        "{b}"
    );
    assert!(
        b["detail"]
            .as_str()
            .unwrap()
            .contains("channel_id, after, limit"),
        "{b}"
    );
    // The operator's filters still filter.
    let (status, _) = app
        .get(
            &format!("/api/v1/admin/audit?tenant_id={tenant}&channel_id={channel}"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(status, 200);
    let (status, page) = app
        .get(
            &format!("/api/v1/admin/channels?tenant_id={tenant}"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(page["data"].as_array().unwrap().len(), 1, "{page}");

    // An instant's `+` sent unencoded reads as a space: the refusal says to send it as %2B.
    let b = assert_invalid(
        get(
            &app,
            "/api/v1/deliveries?since=2026-01-01T00:00:00+00:00",
            Some(&key),
        )
        .await,
        "since",
    )
    .await;
    assert!(b["detail"].as_str().unwrap().contains("%2B"), "{b}");
    // Another bad instant is not told about `+`.
    let b = assert_invalid(
        get(
            &app,
            &format!("/api/v1/channels/{channel}/deliveries?until=yesterday"),
            Some(&key),
        )
        .await,
        "until",
    )
    .await;
    assert!(!b["detail"].as_str().unwrap().contains("%2B"), "{b}");
    let (status, _) = app
        .get("/api/v1/deliveries?since=2026-01-01T00:00:00%2B00:00", &key)
        .await;
    assert_eq!(status, 200);
    app.stop().await;
}

/// Values the README and the OpenAPI document rule out are refused with a 422 that names the
/// field, and nothing is stored (each of these was accepted before): an event type or an
/// idempotency key outside 1 to 200 visible ASCII characters, a blank channel name, `null` for
/// a field that has no "none", and port 0. A bad item of a batch is named with its index.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn values_outside_the_documented_forms_are_refused_naming_the_field(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;
    let path = enqueue_path(channel);

    // A manual action's reason: the display-text rule (no control, bidirectional formatting or
    // invisible character; 1 to 500), so it cannot pass for another log line on the admin page
    // or in an alert. Nothing changes; a blank reason is the default one.
    for bad in [
        "line1%0A2026-12-02T00:00:00Z%20ERROR%20fake",
        "red%1B%5B31m",
        "x%E2%80%AEy",
        "ac%E2%80%8Bme",
    ] {
        let resp = post(
            &app,
            &format!("/api/v1/channels/{channel}/pause?reason={bad}"),
            Some(&key),
            &json!({}),
        )
        .await;
        assert_invalid(resp, "reason").await;
    }
    // Nor bytes that are not UTF-8 (they were stored as U+FFFD).
    let resp = post(
        &app,
        &format!("/api/v1/channels/{channel}/pause?reason=ok%FF"),
        Some(&key),
        &json!({}),
    )
    .await;
    let b = assert_problem(resp, 400).await;
    assert_eq!(
        (&b["code"], &b["field"]),
        (&json!("invalid_query"), &json!("reason")),
        "{b}"
    );
    assert_eq!(app.circuit_state(channel).await, "closed");
    let (s, _) = app
        .post_empty(
            &format!("/api/v1/channels/{channel}/pause?reason=%20"),
            &key,
        )
        .await;
    assert_eq!(s, 200);
    let reason: String = sqlx::query_scalar(
        "SELECT reason FROM audit_log WHERE channel_id = $1 AND action = 'channel.paused'",
    )
    .bind(channel)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(reason.starts_with("channel.paused by tenant:"), "{reason}");
    app.resume(&key, channel).await;

    // Event types: 1 to 200 visible ASCII characters, on every route that takes one.
    let long = "x".repeat(201);
    for bad in [
        "invoice paid",
        " invoice.paid",
        "invoice.paid ",
        "rechnung.geändert",
        &long,
    ] {
        assert_invalid(
            post(&app, &path, Some(&key), &event(bad)).await,
            "event_type",
        )
        .await;
        let message = json!({ "event_type": bad, "payload": {} });
        assert_invalid(
            post(&app, "/api/v1/messages", Some(&key), &message).await,
            "event_type",
        )
        .await;
    }
    // A payload that would read back other than it was signed and sent: a key twice in a nested
    // object (jsonb keeps the last), a lone surrogate (no Unicode text). Top-level duplicates
    // were already refused by the body's own shape.
    for (payload, says) in [
        (r#"{"a":1,"a":2}"#, "duplicate key \"a\" in the object at /"),
        (r#"{"items":[{"k":1,"k":2}]}"#, "at /items/0"),
        (r#""\udc00""#, "surrogate"),
    ] {
        let body = format!(r#"{{"event_type":"a.b","payload":{payload}}}"#);
        let resp = post_raw(&app, &path, &key, body).await;
        let b = assert_invalid(resp, "payload").await;
        assert!(
            b["detail"].as_str().unwrap().contains(says),
            "{payload}: {b}"
        );
    }
    // Two Idempotency-Key headers: which one was meant is not guessed; a batch takes none (each
    // item has its own), rather than silently ignoring it.
    let twice = send(
        app.http
            .post(format!("{}{path}", app.api))
            .bearer_auth(&key)
            .header("idempotency-key", "k1")
            .header("idempotency-key", "k2")
            .json(&event("a.b")),
    )
    .await;
    assert_invalid(twice, "idempotency_key").await;
    let on_batch = send(
        app.http
            .post(format!("{}{path}/batch", app.api))
            .bearer_auth(&key)
            .header("idempotency-key", "k1")
            .json(&json!({ "deliveries": [event("a.b")] })),
    )
    .await;
    assert_invalid(on_batch, "idempotency_key").await;
    // Idempotency keys: the same form, as a header or a batch item's field.
    let with_key = |k: &str| {
        app.http
            .post(format!("{}{path}", app.api))
            .bearer_auth(&key)
            .header("idempotency-key", k)
            .json(&event("a.b"))
    };
    assert_invalid(send(with_key("key one")).await, "idempotency_key").await;
    // A batch names the bad item by its index.
    let batch = |item: Value| json!({ "deliveries": [event("a.b"), item] });
    for (item, field) in [
        (event("a b"), "deliveries[1].event_type"),
        (
            json!({ "event_type": "a.b", "payload": {}, "idempotency_key": "k 1" }),
            "deliveries[1].idempotency_key",
        ),
    ] {
        let resp = post(&app, &format!("{path}/batch"), Some(&key), &batch(item)).await;
        assert_invalid(resp, field).await;
    }
    assert_eq!(count(&app.pool, "deliveries").await, 0);
    assert_eq!(count(&app.pool, "messages").await, 0);
    // Every visible ASCII character is fine.
    let punctuated = "a.b:c/d-e_f~g!h#i@j";
    assert_ok(post(&app, &path, Some(&key), &event(punctuated)).await, 202).await;
    assert_ok(send(with_key("key-1:one/two")).await, 202).await;

    // A channel name, when there is one, is 1 to 200 characters, not only spaces, with no
    // control or bidirectional formatting character (the rule of tenant and key names too).
    let url = app.receiver.url("named");
    for name in ["", "   ", "a\tb", "line\nbreak", "evil\u{202E}gnp.exe"] {
        let body = json!({ "url": url, "name": name });
        assert_invalid(
            post(&app, "/api/v1/channels", Some(&key), &body).await,
            "name",
        )
        .await;
        let (s, v) = app
            .patch_channel(&key, channel, json!({ "name": name }))
            .await;
        assert_eq!((s, v["field"].as_str()), (422, Some("name")), "{v}");
    }
    for (path, body) in [
        ("/api/v1/tenants", json!({ "name": "a\nb" })),
        ("/api/v1/tenant/keys", json!({ "name": "ci\u{202E}" })),
    ] {
        let key = if path == "/api/v1/tenants" {
            breakwater_e2e::OPERATOR_KEY
        } else {
            key.as_str()
        };
        assert_invalid(post(&app, path, Some(key), &body).await, "name").await;
    }
    // Surrounding spaces are trimmed, as for tenants and keys.
    let (s, v) = app
        .patch_channel(&key, channel, json!({ "name": "  spaced  " }))
        .await;
    assert_eq!((s, &v["name"]), (200, &json!("spaced")), "{v}");
    let (s, v) = app
        .patch_channel(&key, channel, json!({ "name": null }))
        .await;
    assert_eq!(
        (s, &v["name"]),
        (200, &Value::Null),
        "null removes the name: {v}"
    );

    // Port 0 names no listening socket: refused, even where private targets are allowed.
    let port0 = json!({ "url": "http://127.0.0.1:0/hook" });
    assert_invalid(
        post(&app, "/api/v1/channels", Some(&key), &port0).await,
        "url",
    )
    .await;
    let (s, v) = app.patch_channel(&key, channel, port0).await;
    assert_eq!((s, v["field"].as_str()), (422, Some("url")), "{v}");
    assert_eq!(count(&app.pool, "channels").await, 1);

    // A replay window's bounds are years 1 to 9999 (beyond, the default window's arithmetic
    // overflowed: a panic; and Postgres cannot compare before 4713 BC: a 500).
    let replay = format!("/api/v1/channels/{channel}/replay");
    for (body, field) in [
        (json!({ "to": "-262143-01-01T00:00:00Z" }), "to"),
        (json!({ "from": "-262143-01-01T00:00:00Z" }), "from"),
        (
            json!({ "from": "-4800-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z" }),
            "from",
        ),
        (json!({ "to": "+20000-01-01T00:00:00Z" }), "to"),
    ] {
        assert_invalid(post(&app, &replay, Some(&key), &body).await, field).await;
    }
    let old = json!({ "from": "0001-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z" });
    assert_ok(post(&app, &replay, Some(&key), &old).await, 200).await;

    // `null` for a field that cannot be null is a type error naming the field, not ignored.
    let before = channel_row(&app.pool, channel).await;
    for field in ["url", "replay_window_ms", "replay_dead_letters_on_close"] {
        let (s, v) = app
            .patch_channel(&key, channel, json!({ field: null }))
            .await;
        assert_null_refused(s, &v, field);
    }
    assert_eq!(channel_row(&app.pool, channel).await, before);
    let tenant_path = format!("/api/v1/tenants/{tenant}");
    for field in ["name", "tier", "alert_on_manual"] {
        let (s, v) = app
            .patch(&tenant_path, OPERATOR_KEY, &json!({ field: null }))
            .await;
        assert_null_refused(s, &v, field);
    }
    let (s, v) = app
        .patch("/api/v1/tenant", &key, &json!({ "alert_on_manual": null }))
        .await;
    assert_null_refused(s, &v, "alert_on_manual");
    app.stop().await;
}

/// A 422 `invalid_body` whose detail names `field`.
fn assert_null_refused(status: u16, body: &Value, field: &str) {
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("invalid_body")),
        "{field}: {body}"
    );
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(field),
        "the detail should name {field}: {body}"
    );
}

/// Routes whose every body field is optional take a bare `POST` (no body, no content type): a
/// channel's replay (the last 24 h), a new API key (no label), a signing-secret rotation (the
/// default grace). A body that is there must still be JSON.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_bare_post_is_accepted_where_every_body_field_is_optional(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let routes = [
        (format!("/api/v1/channels/{channel}/replay"), 200),
        ("/api/v1/tenant/keys".to_string(), 201),
        (format!("/api/v1/channels/{channel}/secret/rotate"), 200),
    ];
    for (path, status) in &routes {
        let (s, v) = app.post_empty(path, &key).await;
        assert_eq!(s, *status, "{path}: {v}");
    }
    for (path, _) in &routes {
        let resp = send(
            app.http
                .post(format!("{}{path}", app.api))
                .bearer_auth(&key)
                .header("content-type", "text/plain")
                .body("{}"),
        )
        .await;
        assert_problem(resp, 415).await;
    }
    app.stop().await;
}
