//! Routing and authentication: public health, 401 without or with a wrong key, 403 for the
//! other side's key, and keys stored only as digests.

use super::{count, enqueue_path, event};
use breakwater_e2e::http::{assert_ok, assert_problem, get, post, send};
use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::json;
use sqlx::PgPool;

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn health_is_public_and_unknown_routes_are_404_problems(pool: PgPool) {
    let app = TestApp::spawn(pool).await;

    let body = assert_ok(get(&app, "/healthz", None).await, 200).await;
    assert_eq!(body["status"], "ok");

    for path in [
        "/nope",
        "/api/v1/nope",
        "/api/v2/channels",
        "/api/v1/channels/a/b/c",
    ] {
        let body = assert_problem(get(&app, path, Some(OPERATOR_KEY)).await, 404).await;
        assert_eq!(body["code"], "not_found", "{path}: {body}");
        assert_problem(get(&app, path, None).await, 404).await;
    }
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn missing_or_wrong_credentials_are_401(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;
    let tenants_before = count(&app.pool, "tenants").await;

    let url = |p: &str| format!("{}{p}", app.api);
    let requests = [
        // No Authorization header at all.
        app.http.get(url("/api/v1/channels")),
        app.http.get(url(&format!("/api/v1/channels/{channel}"))),
        app.http
            .post(url(&enqueue_path(channel)))
            .json(&event("a.b")),
        app.http
            .post(url("/api/v1/tenants"))
            .json(&json!({ "name": "x" })),
        // A key nobody issued.
        app.http
            .get(url("/api/v1/channels"))
            .bearer_auth("bw_notAKeyThatWasEverIssued000000"),
        app.http
            .post(url("/api/v1/tenants"))
            .bearer_auth("not-the-operator-key-at-all")
            .json(&json!({ "name": "x" })),
        app.http
            .post(url(&enqueue_path(channel)))
            .bearer_auth(format!("{key}x"))
            .json(&event("a.b")),
        // Malformed Authorization values.
        app.http
            .get(url("/api/v1/channels"))
            .header("authorization", format!("Basic {key}")),
        app.http
            .get(url("/api/v1/channels"))
            .header("authorization", key.clone()),
        app.http
            .get(url("/api/v1/channels"))
            .header("authorization", "Bearer "),
        app.http
            .post(url("/api/v1/tenants"))
            .header("authorization", "Bearer")
            .json(&json!({ "name": "x" })),
        // Two credentials, even both valid: ambiguous, neither is taken.
        app.http
            .get(url("/api/v1/channels"))
            .bearer_auth(&key)
            .header("authorization", format!("Bearer {key}")),
        app.http
            .post(url("/api/v1/tenants"))
            .bearer_auth(OPERATOR_KEY)
            .header("authorization", format!("Bearer {OPERATOR_KEY}"))
            .json(&json!({ "name": "x" })),
    ];
    for req in requests {
        let resp = send(req).await;
        let www = resp
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string());
        let body = assert_problem(resp, 401).await;
        assert_eq!(body["code"], "unauthorized");
        assert_eq!(
            www.as_deref(),
            Some("Bearer"),
            "401 must name the scheme: {body}"
        );
    }

    // Nothing was created by the refused requests.
    assert_eq!(count(&app.pool, "tenants").await, tenants_before);
    assert_eq!(count(&app.pool, "deliveries").await, 0);
    // The right key still works.
    assert_ok(get(&app, "/api/v1/channels", Some(&key)).await, 200).await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn keys_used_on_the_other_sides_routes_are_403(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (key, channel) = app.tenant_with_channel("acme").await;

    // A tenant key cannot create tenants.
    let body = assert_problem(
        post(
            &app,
            "/api/v1/tenants",
            Some(&key),
            &json!({ "name": "evil" }),
        )
        .await,
        403,
    )
    .await;
    assert_eq!(body["code"], "forbidden");
    assert_eq!(count(&app.pool, "tenants").await, 1);

    // The operator key cannot act as a tenant.
    let op = Some(OPERATOR_KEY);
    let url = app.receiver.url("op");
    assert_problem(
        post(&app, "/api/v1/channels", op, &json!({ "url": url })).await,
        403,
    )
    .await;
    assert_problem(get(&app, "/api/v1/channels", op).await, 403).await;
    assert_problem(
        get(&app, &format!("/api/v1/channels/{channel}"), op).await,
        403,
    )
    .await;
    assert_problem(
        post(&app, &enqueue_path(channel), op, &event("a.b")).await,
        403,
    )
    .await;
    let batch = json!({ "deliveries": [event("a.b")] });
    assert_problem(
        post(
            &app,
            &format!("{}/batch", enqueue_path(channel)),
            op,
            &batch,
        )
        .await,
        403,
    )
    .await;
    assert_eq!(count(&app.pool, "channels").await, 1);
    assert_eq!(count(&app.pool, "deliveries").await, 0);

    // A real delivery id is still 403 (not 404 or 200) for the operator.
    let delivery = app.deliver(&key, channel, json!({})).await;
    assert_problem(
        get(&app, &format!("/api/v1/deliveries/{delivery}"), op).await,
        403,
    )
    .await;
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn api_keys_are_stored_only_as_digests(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "high").await;
    assert!(key.starts_with("bw_") && key.len() >= 32, "api key {key:?}");

    // The stored digest is SHA-256 of the key, and no column holds the key itself.
    let (hash, matches): (Vec<u8>, bool) =
        sqlx::query_as("SELECT key_hash, key_hash = sha256(convert_to($1, 'UTF8')) FROM api_keys WHERE tenant_id = $2")
            .bind(&key)
            .bind(tenant)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(matches, "key_hash is not sha256(api_key)");
    assert!(
        !hash.windows(key.len()).any(|w| w == key.as_bytes()),
        "key_hash holds the plain key"
    );
    let rows: Vec<String> = sqlx::query_scalar("SELECT to_jsonb(k)::text FROM api_keys k")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(
        !rows[0].contains(&key),
        "api_keys row holds the plain key: {}",
        rows[0]
    );
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns WHERE table_name = 'api_keys' ORDER BY column_name",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        columns,
        [
            "created_at",
            "id",
            "key_hash",
            "last_used_at",
            "name",
            "prefix",
            "revoked_at",
            "tenant_id"
        ]
    );
    // Nor does any other table.
    let anywhere: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM tenants t WHERE strpos(to_jsonb(t)::text, $1) > 0)
              + (SELECT count(*) FROM audit_log a WHERE strpos(to_jsonb(a)::text, $1) > 0)",
    )
    .bind(&key)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(anywhere, 0, "the plain key is stored somewhere");

    // The key authenticates through its digest.
    assert_ok(get(&app, "/api/v1/channels", Some(&key)).await, 200).await;
    app.stop().await;
}
