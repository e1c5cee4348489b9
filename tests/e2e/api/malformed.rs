//! Malformed requests: bad JSON, non-UUID ids, and text the database cannot store are refused
//! with a problem, never a 500.

use super::{count, enqueue_path, event};
use breakwater_e2e::http::{assert_ok, assert_problem, get, post, post_raw, send};
use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn malformed_json_and_non_uuid_ids_are_400(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;

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

    for path in [
        "/api/v1/channels/not-a-uuid".to_string(),
        "/api/v1/channels/123".to_string(),
        "/api/v1/deliveries/not-a-uuid".to_string(),
        format!("/api/v1/deliveries/{}x", Uuid::now_v7()),
    ] {
        let b = assert_problem(get(&app, &path, Some(&key)).await, 400).await;
        assert_eq!(b["code"], "invalid_path", "{path}: {b}");
    }
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

    assert_eq!(count(&app.pool, "channels").await, 1);
    assert_eq!(count(&app.pool, "deliveries").await, 0);
    assert_eq!(count(&app.pool, "tenants").await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn text_the_database_cannot_store_is_refused_not_a_500(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;
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
        let accepted = assert_ok(
            post(
                &app,
                &enqueue_path(channel),
                Some(&key),
                &json!({ "event_type": "a.b", "payload": payload }),
            )
            .await,
            202,
        )
        .await;
        let id = accepted["id"].as_str().unwrap();
        let read = assert_ok(
            get(&app, &format!("/api/v1/deliveries/{id}"), Some(&key)).await,
            200,
        )
        .await;
        assert_eq!(read["payload"], payload);
    }

    // A backslash-u sequence spelled out in a string is ordinary text and is accepted.
    let ok = json!({ "event_type": "a.b", "payload": { "s": "\\u0000" } });
    let accepted = assert_ok(
        post(&app, &enqueue_path(channel), Some(&key), &ok).await,
        202,
    )
    .await;
    let id = accepted["id"].as_str().unwrap();
    let read = assert_ok(
        get(&app, &format!("/api/v1/deliveries/{id}"), Some(&key)).await,
        200,
    )
    .await;
    assert_eq!(read["payload"], ok["payload"]);
    app.stop().await;
}
