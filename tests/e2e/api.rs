//! API behaviour: auth, tenant isolation, bad input.
//!
//! Every error must be an `application/problem+json` body whose `status` matches the HTTP status
//! and whose `detail` says what is wrong; no request may produce a 500.

use breakwater_e2e::{TestApp, OPERATOR_KEY};
use reqwest::{RequestBuilder, Response};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

/// Sends a request built on `app.http`.
async fn send(req: RequestBuilder) -> Response {
    req.send().await.expect("request")
}

/// `POST {api}{path}` with `key` (if any) and a JSON body; the raw response.
async fn post(app: &TestApp, path: &str, key: Option<&str>, body: &Value) -> Response {
    let mut req = app.http.post(format!("{}{path}", app.api)).json(body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    send(req).await
}

/// `POST {api}{path}` with `key` and a raw body sent as `application/json`.
async fn post_raw(app: &TestApp, path: &str, key: &str, body: &'static str) -> Response {
    send(
        app.http
            .post(format!("{}{path}", app.api))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body),
    )
    .await
}

/// `GET {api}{path}` with `key` (if any); the raw response.
async fn get(app: &TestApp, path: &str, key: Option<&str>) -> Response {
    let mut req = app.http.get(format!("{}{path}", app.api));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    send(req).await
}

/// Asserts that `resp` is a problem with HTTP status `status`: the content type is
/// `application/problem+json`, the body's `status` equals the HTTP status, `detail`, `code`,
/// `title` and `type` are non-empty. Returns the body.
async fn assert_problem(resp: Response, status: u16) -> Value {
    let got = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let url = resp.url().clone();
    let text = resp.text().await.expect("body");
    assert_eq!(got, status, "{url}: status; body: {text}");
    assert!(
        content_type.starts_with("application/problem+json"),
        "{url}: content-type {content_type:?}; body: {text}"
    );
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{url}: problem is not JSON ({e}): {text}"));
    assert_eq!(body["status"], json!(status), "{url}: body status: {body}");
    for field in ["detail", "code", "title", "type"] {
        let v = body[field].as_str().unwrap_or("");
        assert!(
            !v.trim().is_empty(),
            "{url}: problem {field} is empty: {body}"
        );
    }
    body
}

/// Asserts a 422 problem that names `field`.
async fn assert_invalid(resp: Response, field: &str) -> Value {
    let body = assert_problem(resp, 422).await;
    if body["code"] == "invalid_field" {
        assert_eq!(body["field"], json!(field), "field of {body}");
    }
    assert!(
        body["detail"].as_str().unwrap().contains(field),
        "detail should name {field}: {body}"
    );
    body
}

/// Asserts a success status and returns the JSON body.
async fn assert_ok(resp: Response, status: u16) -> Value {
    let got = resp.status().as_u16();
    let url = resp.url().clone();
    let text = resp.text().await.expect("body");
    assert_eq!(got, status, "{url}: status; body: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: not JSON ({e}): {text}"))
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The whole channel row as JSON.
async fn channel_row(pool: &PgPool, id: Uuid) -> Value {
    sqlx::query_scalar("SELECT to_jsonb(c) FROM channels c WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn enqueue_path(channel: Uuid) -> String {
    format!("/api/v1/channels/{channel}/deliveries")
}

fn event(event_type: &str) -> Value {
    json!({ "event_type": event_type, "payload": { "n": 1 } })
}

// ---------------------------------------------------------------------------------------------
// Routing and authentication
// ---------------------------------------------------------------------------------------------

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
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;
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
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;

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

// ---------------------------------------------------------------------------------------------
// Tenants and channels
// ---------------------------------------------------------------------------------------------

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn tenant_creation_returns_secrets_once_and_rejects_bad_fields(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let op = Some(OPERATOR_KEY);

    let body = assert_ok(
        post(
            &app,
            "/api/v1/tenants",
            op,
            &json!({ "name": "acme", "tier": "bulk" }),
        )
        .await,
        201,
    )
    .await;
    assert!(
        body["id"].as_str().unwrap().parse::<Uuid>().is_ok(),
        "{body}"
    );
    assert_eq!(body["name"], "acme");
    assert_eq!(body["tier"], "bulk");
    assert_eq!(body["alert_url"], Value::Null);
    assert!(body["created_at"].is_string(), "{body}");
    assert!(
        body["api_key"].as_str().unwrap().starts_with("bw_"),
        "{body}"
    );
    assert!(
        body["alert_secret"].as_str().unwrap().starts_with("whsec_"),
        "{body}"
    );
    let body = assert_ok(
        post(&app, "/api/v1/tenants", op, &json!({ "name": "plain" })).await,
        201,
    )
    .await;
    assert_eq!(body["tier"], "default", "tier defaults to default: {body}");
    assert_eq!(count(&app.pool, "tenants").await, 2);

    for (bad, field) in [
        (json!({ "name": "x", "tier": "platinum" }), "tier"),
        (json!({ "name": "x", "tier": "" }), "tier"),
        (json!({ "name": "" }), "name"),
        (json!({ "name": "   " }), "name"),
        (json!({ "name": "x".repeat(201) }), "name"),
        (
            json!({ "name": "x", "alert_url": "not a url" }),
            "alert_url",
        ),
        (json!({ "name": "x", "alert_url": "ftp://x" }), "alert_url"),
    ] {
        assert_invalid(post(&app, "/api/v1/tenants", op, &bad).await, field).await;
    }
    for bad in [
        json!({ "name": "x", "plan": "gold" }),
        json!({}),
        json!({ "name": 7 }),
        json!([]),
    ] {
        let body = assert_problem(post(&app, "/api/v1/tenants", op, &bad).await, 422).await;
        assert_eq!(body["code"], "invalid_body", "{bad}: {body}");
    }
    assert_eq!(
        count(&app.pool, "tenants").await,
        2,
        "a refused request created a tenant"
    );
    assert_eq!(count(&app.pool, "api_keys").await, 2);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn channels_are_created_listed_and_read_by_their_tenant(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let url = app.receiver.url("orders");
    let req = json!({ "url": url, "name": "orders", "failure_threshold": 3, "cooldown_ms": 5000 });
    let created = assert_ok(post(&app, "/api/v1/channels", Some(&key), &req).await, 201).await;
    let id: Uuid = created["id"].as_str().unwrap().parse().unwrap();
    assert!(
        created["signing_secret"]
            .as_str()
            .unwrap()
            .starts_with("whsec_"),
        "{created}"
    );
    assert_eq!(created["tenant_id"], json!(tenant));
    assert_eq!(created["url"], json!(url));
    assert_eq!(created["name"], "orders");
    assert_eq!(created["failure_threshold"], 3);
    assert_eq!(created["cooldown_ms"], 5000);
    assert_eq!(created["circuit_state"], "closed");

    // Reading it back never shows the secret again.
    let read = assert_ok(
        get(&app, &format!("/api/v1/channels/{id}"), Some(&key)).await,
        200,
    )
    .await;
    assert_eq!(read["id"], json!(id));
    assert_eq!(read["url"], json!(url));
    assert!(
        read.get("signing_secret").is_none(),
        "secret shown on read: {read}"
    );

    let second = app.channel(&key, "other").await;
    let list = assert_ok(get(&app, "/api/v1/channels", Some(&key)).await, 200).await;
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.to_string(), second.to_string()]);
    assert!(list["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c.get("signing_secret").is_none()));
    assert_eq!(list["next_cursor"], Value::Null);

    // Paging: one per page, in creation order, through the opaque cursor.
    let page = assert_ok(get(&app, "/api/v1/channels?limit=1", Some(&key)).await, 200).await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert_eq!(page["data"][0]["id"], json!(id));
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_string();
    let page = assert_ok(
        get(
            &app,
            &format!("/api/v1/channels?limit=1&after={cursor}"),
            Some(&key),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(page["data"][0]["id"], json!(second));
    assert_eq!(page["next_cursor"], Value::Null);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn invalid_channel_fields_are_422_and_create_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let good = app.receiver.url("x");

    for (bad, field) in [
        (json!({ "url": "not a url" }), "url"),
        (json!({ "url": "ftp://x" }), "url"),
        (json!({ "url": "" }), "url"),
        (json!({ "url": "http://user:pw@example.com/" }), "url"),
        (
            json!({ "url": good, "failure_threshold": 0 }),
            "failure_threshold",
        ),
        (json!({ "url": good, "cooldown_ms": -1 }), "cooldown_ms"),
        (json!({ "url": good, "name": "n".repeat(201) }), "name"),
    ] {
        assert_invalid(
            post(&app, "/api/v1/channels", Some(&key), &bad).await,
            field,
        )
        .await;
    }
    for bad in [
        json!({ "url": good, "secret": "whsec_mine" }),
        json!({ "name": "no url" }),
        json!({ "url": 42 }),
    ] {
        let body =
            assert_problem(post(&app, "/api/v1/channels", Some(&key), &bad).await, 422).await;
        assert_eq!(body["code"], "invalid_body", "{bad}: {body}");
    }
    // Query parameters are checked too.
    assert_invalid(
        get(&app, "/api/v1/channels?limit=0", Some(&key)).await,
        "limit",
    )
    .await;
    assert_invalid(
        get(&app, "/api/v1/channels?limit=100000", Some(&key)).await,
        "limit",
    )
    .await;
    assert_invalid(
        get(&app, "/api/v1/channels?limit=ten", Some(&key)).await,
        "limit",
    )
    .await;
    assert_invalid(
        get(&app, "/api/v1/channels?after=not-a-cursor", Some(&key)).await,
        "after",
    )
    .await;

    assert_eq!(
        count(&app.pool, "channels").await,
        0,
        "a refused request created a channel"
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn private_targets_are_422_when_not_allowed(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.allow_private_targets = false).await;
    let (_, key) = app.tenant("acme", "default").await;

    for url in [
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/hook",
        "http://192.168.1.10/hook",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://localhost:8080/hook",
        "http://0.0.0.0/hook",
    ] {
        assert_invalid(
            post(&app, "/api/v1/channels", Some(&key), &json!({ "url": url })).await,
            "url",
        )
        .await;
    }
    // The receiver itself is on loopback.
    let receiver = app.receiver.url("x");
    assert_invalid(
        post(
            &app,
            "/api/v1/channels",
            Some(&key),
            &json!({ "url": receiver }),
        )
        .await,
        "url",
    )
    .await;
    assert_eq!(count(&app.pool, "channels").await, 0);

    // The tenant's alert URL is checked the same way.
    let bad = json!({ "name": "t", "alert_url": "http://169.254.169.254/" });
    assert_invalid(
        post(&app, "/api/v1/tenants", Some(OPERATOR_KEY), &bad).await,
        "alert_url",
    )
    .await;
    assert_eq!(count(&app.pool, "tenants").await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_refused_target_tells_the_tenant_nothing_about_the_inside(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| s.allow_private_targets = false).await;
    let (_, key) = app.tenant("acme", "default").await;
    // A name that resolves to loopback on this server (its own hostname, as /etc/hosts usually
    // maps it), and literal internal addresses.
    let mut urls = vec![
        "http://10.0.0.1/hook".to_string(),
        "http://[::1]/hook".to_string(),
        "http://localhost/hook".to_string(),
    ];
    for name in [
        std::fs::read_to_string("/etc/hostname")
            .unwrap_or_default()
            .trim()
            .to_string(),
        "ip6-localhost".to_string(),
    ] {
        if name.is_empty() {
            continue;
        }
        let loopback = tokio::net::lookup_host((name.as_str(), 80))
            .await
            .map(|mut a| a.any(|a| a.ip().is_loopback()))
            .unwrap_or(false);
        if loopback {
            urls.push(format!("http://{name}/"));
        }
    }
    for url in &urls {
        let r = post(&app, "/api/v1/channels", Some(&key), &json!({ "url": url })).await;
        assert_eq!(r.status(), 422, "{url}");
        let body = r.text().await.unwrap();
        assert!(
            body.contains("the URL's host is not an allowed target"),
            "{url}: {body}"
        );
        for leak in [
            "127.",
            "::1",
            "10.0.0.1",
            "BREAKWATER_",
            "resolves to",
            "loopback",
        ] {
            assert!(
                !body.contains(leak),
                "{url}: the problem body leaks {leak:?}: {body}"
            );
        }
    }
    // The same for the tenant's alert URL.
    let r = post(
        &app,
        "/api/v1/tenants",
        Some(OPERATOR_KEY),
        &json!({ "name": "t", "alert_url": "http://127.0.0.1:9/" }),
    )
    .await;
    let body = r.text().await.unwrap();
    assert!(
        body.contains("not an allowed target") && !body.contains("127."),
        "{body}"
    );
    app.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Malformed requests
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Tenant isolation
// ---------------------------------------------------------------------------------------------

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn other_tenants_channel_is_404_and_unchanged(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key_a) = app.tenant("a", "default").await;
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_a = app.channel(&key_a, "a").await;
    let channel_b = app.channel(&key_b, "b").await;
    let before = channel_row(&app.pool, channel_a).await;

    // Another tenant's channel answers exactly like one that does not exist.
    let missing = assert_problem(
        get(
            &app,
            &format!("/api/v1/channels/{}", Uuid::now_v7()),
            Some(&key_b),
        )
        .await,
        404,
    )
    .await;
    let foreign = assert_problem(
        get(&app, &format!("/api/v1/channels/{channel_a}"), Some(&key_b)).await,
        404,
    )
    .await;
    assert_eq!(foreign, missing);
    assert_eq!(foreign["code"], "not_found");

    // B cannot enqueue to it, one at a time or in a batch, with or without an idempotency key.
    assert_problem(
        post(&app, &enqueue_path(channel_a), Some(&key_b), &event("x.y")).await,
        404,
    )
    .await;
    let resp = send(
        app.http
            .post(format!("{}{}", app.api, enqueue_path(channel_a)))
            .bearer_auth(&key_b)
            .header("idempotency-key", "k1")
            .json(&event("x.y")),
    )
    .await;
    assert_problem(resp, 404).await;
    let batch = json!({ "deliveries": [event("x.y"), event("x.z")] });
    assert_problem(
        post(
            &app,
            &format!("{}/batch", enqueue_path(channel_a)),
            Some(&key_b),
            &batch,
        )
        .await,
        404,
    )
    .await;
    assert_eq!(
        count(&app.pool, "deliveries").await,
        0,
        "a delivery was created on another tenant's channel"
    );
    assert_eq!(count(&app.pool, "jobs").await, 0);

    // B's list holds only B's channel.
    let list = assert_ok(get(&app, "/api/v1/channels", Some(&key_b)).await, 200).await;
    let ids: Vec<&Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(ids, [&json!(channel_b)]);
    // Paging from A's channel id does not reveal it either: a raw id is not a cursor.
    assert_invalid(
        get(
            &app,
            &format!("/api/v1/channels?after={channel_a}"),
            Some(&key_b),
        )
        .await,
        "after",
    )
    .await;

    // A's channel is untouched and still A's.
    assert_eq!(channel_row(&app.pool, channel_a).await, before);
    let read = assert_ok(
        get(&app, &format!("/api/v1/channels/{channel_a}"), Some(&key_a)).await,
        200,
    )
    .await;
    assert_eq!(read["id"], json!(channel_a));
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn other_tenants_delivery_is_404(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant_a, key_a) = app.tenant("a", "default").await;
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_a = app.channel(&key_a, "a").await;
    let delivery = app
        .deliver(&key_a, channel_a, json!({ "secret": "A's data" }))
        .await;

    let own = assert_ok(
        get(
            &app,
            &format!("/api/v1/deliveries/{delivery}"),
            Some(&key_a),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(own["id"], json!(delivery));
    assert_eq!(own["channel_id"], json!(channel_a));
    assert_eq!(own["event_type"], "test.event");
    assert_eq!(own["payload"], json!({ "secret": "A's data" }));
    assert!(own["attempts"].is_number(), "{own}");
    assert!(own["attempt_log"].is_array(), "{own}");

    let missing = assert_problem(
        get(
            &app,
            &format!("/api/v1/deliveries/{}", Uuid::now_v7()),
            Some(&key_b),
        )
        .await,
        404,
    )
    .await;
    let foreign = assert_problem(
        get(
            &app,
            &format!("/api/v1/deliveries/{delivery}"),
            Some(&key_b),
        )
        .await,
        404,
    )
    .await;
    assert_eq!(
        foreign, missing,
        "another tenant's delivery must look missing"
    );
    assert!(!foreign.to_string().contains("A's data"));

    // Still A's, with the data A sent.
    let (owner, payload): (Uuid, String) =
        sqlx::query_as("SELECT tenant_id, payload FROM deliveries WHERE id = $1")
            .bind(delivery)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(owner, tenant_a);
    assert_eq!(
        serde_json::from_str::<Value>(&payload).unwrap(),
        json!({ "secret": "A's data" })
    );
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    app.stop().await;
}

// ---------------------------------------------------------------------------------------------
// Enqueueing deliveries
// ---------------------------------------------------------------------------------------------

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn invalid_deliveries_are_422_and_insert_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;
    let path = enqueue_path(channel);

    for (bad, field) in [
        (json!({ "event_type": "", "payload": {} }), "event_type"),
        (json!({ "event_type": "   ", "payload": {} }), "event_type"),
        (
            json!({ "event_type": "e".repeat(201), "payload": {} }),
            "event_type",
        ),
        (json!({ "event_type": "a\nb", "payload": {} }), "event_type"),
    ] {
        assert_invalid(post(&app, &path, Some(&key), &bad).await, field).await;
    }
    for bad in [
        json!({ "event_type": "a.b", "payload": {}, "priority": 1 }),
        json!({ "event_type": "a.b" }),
        json!({ "payload": {} }),
        json!({ "event_type": 5, "payload": {} }),
    ] {
        let body = assert_problem(post(&app, &path, Some(&key), &bad).await, 422).await;
        assert_eq!(body["code"], "invalid_body", "{bad}: {body}");
    }
    // An empty Idempotency-Key is refused, not treated as "no key".
    let resp = send(
        app.http
            .post(format!("{}{path}", app.api))
            .bearer_auth(&key)
            .header("idempotency-key", "")
            .json(&event("a.b")),
    )
    .await;
    assert_invalid(resp, "idempotency_key").await;
    // Enqueueing to a channel that does not exist.
    assert_problem(
        post(
            &app,
            &enqueue_path(Uuid::now_v7()),
            Some(&key),
            &event("a.b"),
        )
        .await,
        404,
    )
    .await;

    assert_eq!(count(&app.pool, "deliveries").await, 0);
    assert_eq!(count(&app.pool, "jobs").await, 0);

    // Accepted: 202 pending.
    let ok = assert_ok(post(&app, &path, Some(&key), &event("  a.b  ")).await, 202).await;
    assert_eq!(ok["status"], "pending");
    assert_eq!(ok["idempotent_replay"], false);
    let id = ok["id"].as_str().unwrap();
    let read = assert_ok(
        get(&app, &format!("/api/v1/deliveries/{id}"), Some(&key)).await,
        200,
    )
    .await;
    assert_eq!(read["event_type"], "a.b", "event type is stored trimmed");
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn oversized_payloads_are_413(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;
    let path = enqueue_path(channel);
    let payload = |kib: usize| json!({ "data": "x".repeat(kib * 1024) });

    // Far over the limit: refused by the body limit.
    let resp = post(
        &app,
        &path,
        Some(&key),
        &json!({ "event_type": "big", "payload": payload(300) }),
    )
    .await;
    let body = assert_problem(resp, 413).await;
    assert_eq!(body["code"], "payload_too_large");
    // Just over 256 KiB: the body fits the envelope allowance, the payload does not.
    let resp = post(
        &app,
        &path,
        Some(&key),
        &json!({ "event_type": "big", "payload": payload(257) }),
    )
    .await;
    let body = assert_problem(resp, 413).await;
    assert_eq!(body["field"], "payload", "{body}");
    // In a batch, one oversized item refuses the batch.
    let batch =
        json!({ "deliveries": [event("small"), { "event_type": "big", "payload": payload(300) }] });
    let body = assert_problem(
        post(&app, &format!("{path}/batch"), Some(&key), &batch).await,
        413,
    )
    .await;
    assert!(
        body["detail"].as_str().unwrap().contains("deliveries[1]"),
        "{body}"
    );
    assert_eq!(count(&app.pool, "deliveries").await, 0);

    // Under the limit is fine.
    assert_ok(
        post(
            &app,
            &path,
            Some(&key),
            &json!({ "event_type": "ok", "payload": payload(250) }),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn repeated_idempotency_key_replays_the_first_delivery(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;
    let other_channel = app.channel(&key, "acme2").await;
    let enqueue = |channel: Uuid, key: String, idem: &'static str, event_type: &'static str| {
        let req = app
            .http
            .post(format!("{}{}", app.api, enqueue_path(channel)))
            .bearer_auth(key)
            .header("idempotency-key", idem)
            .json(&event(event_type));
        send(req)
    };

    let first = assert_ok(enqueue(channel, key.clone(), "order-1", "a.b").await, 202).await;
    assert_eq!(first["idempotent_replay"], false);
    let again = assert_ok(enqueue(channel, key.clone(), "order-1", "a.b").await, 202).await;
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["idempotent_replay"], true);
    // The replay reports the first delivery's real status (a worker may have sent it already).
    assert!(
        ["pending", "delivering", "delivered"].contains(&again["status"].as_str().unwrap()),
        "{again}"
    );
    // The same key with a different request is a conflict: the new event must not be dropped
    // silently. Nothing changes.
    let changed = assert_problem(enqueue(channel, key.clone(), "order-1", "c.d").await, 409).await;
    assert_eq!(changed["code"], "conflict");
    assert_eq!(count(&app.pool, "deliveries").await, 1);
    let event_type: String = sqlx::query_scalar("SELECT event_type FROM deliveries")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(event_type, "a.b");
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE kind = 'deliver'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(jobs, 1, "a replay enqueued another job");

    // The same key for another of the tenant's channels is a conflict, not a silent replay.
    let body = assert_problem(
        enqueue(other_channel, key.clone(), "order-1", "a.b").await,
        409,
    )
    .await;
    assert_eq!(body["code"], "conflict");
    // Batch items with a used key replay too.
    let batch = json!({ "deliveries": [
        { "event_type": "a.b", "payload": { "n": 1 }, "idempotency_key": "order-1" },
        { "event_type": "a.b", "payload": {}, "idempotency_key": "order-2" },
    ] });
    let out = assert_ok(
        post(
            &app,
            &format!("{}/batch", enqueue_path(channel)),
            Some(&key),
            &batch,
        )
        .await,
        202,
    )
    .await;
    assert_eq!(out["data"][0]["id"], first["id"]);
    assert_eq!(out["data"][0]["idempotent_replay"], true);
    assert_eq!(out["data"][1]["idempotent_replay"], false);
    assert_eq!(count(&app.pool, "deliveries").await, 2);

    // Keys are per tenant: another tenant's identical key is a new delivery.
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_b = app.channel(&key_b, "b").await;
    let theirs = assert_ok(
        enqueue(channel_b, key_b.clone(), "order-1", "a.b").await,
        202,
    )
    .await;
    assert_eq!(theirs["idempotent_replay"], false);
    assert_ne!(theirs["id"], first["id"]);
    assert_eq!(count(&app.pool, "deliveries").await, 3);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn batch_enqueues_in_order_and_is_all_or_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "acme").await;
    let path = format!("{}/batch", enqueue_path(channel));

    let batch = json!({ "deliveries": [
        { "event_type": "first", "payload": { "i": 0 } },
        { "event_type": "second", "payload": { "i": 1 } },
        { "event_type": "third", "payload": { "i": 2 } },
    ] });
    let out = assert_ok(post(&app, &path, Some(&key), &batch).await, 202).await;
    let data = out["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    for (i, (item, event_type)) in data.iter().zip(["first", "second", "third"]).enumerate() {
        assert_eq!(item["status"], "pending");
        assert_eq!(item["idempotent_replay"], false);
        let id = item["id"].as_str().unwrap();
        let read = assert_ok(
            get(&app, &format!("/api/v1/deliveries/{id}"), Some(&key)).await,
            200,
        )
        .await;
        assert_eq!(read["event_type"], event_type, "item {i} out of order");
        assert_eq!(read["payload"], json!({ "i": i }));
    }
    assert_eq!(count(&app.pool, "deliveries").await, 3);

    // One invalid item refuses the whole batch, naming the item.
    let bad = json!({ "deliveries": [event("ok.1"), event(""), event("ok.2")] });
    let body = assert_invalid(post(&app, &path, Some(&key), &bad).await, "event_type").await;
    assert!(
        body["detail"].as_str().unwrap().contains("deliveries[1]"),
        "{body}"
    );
    let bad = json!({ "deliveries": [event("ok.1"), { "event_type": "x", "payload": {}, "idempotency_key": "" }] });
    assert_invalid(post(&app, &path, Some(&key), &bad).await, "idempotency_key").await;
    let bad = json!({ "deliveries": [event("ok.1"), { "event_type": "x", "payload": {}, "extra": true }] });
    assert_problem(post(&app, &path, Some(&key), &bad).await, 422).await;
    assert_invalid(
        post(&app, &path, Some(&key), &json!({ "deliveries": [] })).await,
        "deliveries",
    )
    .await;
    assert_problem(post(&app, &path, Some(&key), &json!({})).await, 422).await;
    assert_eq!(
        count(&app.pool, "deliveries").await,
        3,
        "a refused batch inserted deliveries"
    );
    app.stop().await;
}
