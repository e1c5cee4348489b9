//! Tenants and channels: creation (secrets shown once), listing and reading, invalid fields,
//! and targets the service must refuse without telling anything about the inside.

use super::count;
use breakwater_e2e::http::{assert_invalid, assert_ok, assert_problem, get, post, send};
use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

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
        // Never trimmed of spaces or cleaned of control characters without a word: refused.
        (json!({ "url": format!(" {good}") }), "url"),
        (json!({ "url": format!("{good}\n") }), "url"),
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
    // And a name that does not resolve at all (RFC 6761: .invalid never does).
    urls.push("https://no-such-host.invalid/hook".to_string());
    let mut details = std::collections::BTreeSet::new();
    for url in &urls {
        let r = post(&app, "/api/v1/channels", Some(&key), &json!({ "url": url })).await;
        assert_eq!(r.status(), 422, "{url}");
        let body: Value = r.json().await.unwrap();
        let detail = body["detail"].as_str().unwrap().to_string();
        assert!(
            detail.contains("the URL's host is not an allowed target"),
            "{url}: {body}"
        );
        // The rule and the setting that allows internal targets are named (a newcomer trying
        // a loopback receiver needs both); nothing about the address the name is or resolves
        // to is.
        assert!(
            detail.contains("loopback, private")
                && detail.contains("BREAKWATER_ALLOW_PRIVATE_TARGETS=true"),
            "{url}: {body}"
        );
        for leak in ["127.", "::1", "10.0.0.1", "resolves to"] {
            assert!(
                !detail.contains(leak),
                "{url}: the problem body leaks {leak:?}: {body}"
            );
        }
        details.insert(detail);
    }
    // One text for every refusal: an internal name and a missing one cannot be told apart.
    assert_eq!(details.len(), 1, "{details:?}");
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

/// RFC 9110 §15.3.2: a 201 names the object it created in `Location`; the tenant, channel and
/// key routes each answer with the path of the new object, which reads it (or, for a key, which
/// revokes it).
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_created_object_is_named_by_the_location_of_its_201(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let op = Some(OPERATOR_KEY);
    let location = |resp: &reqwest::Response| {
        resp.headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .unwrap_or_default()
    };

    let resp = post(&app, "/api/v1/tenants", op, &json!({ "name": "acme" })).await;
    let at = location(&resp);
    let tenant = assert_ok(resp, 201).await;
    let tenant_id = tenant["id"].as_str().unwrap();
    assert_eq!(at, format!("/api/v1/tenants/{tenant_id}"));
    let read = assert_ok(get(&app, &at, op).await, 200).await;
    assert_eq!(read["id"], tenant["id"]);
    let key = tenant["api_key"].as_str().unwrap();

    let req = json!({ "url": app.receiver.url("orders") });
    let resp = post(&app, "/api/v1/channels", Some(key), &req).await;
    let at = location(&resp);
    let channel = assert_ok(resp, 201).await;
    assert_eq!(
        at,
        format!("/api/v1/channels/{}", channel["id"].as_str().unwrap())
    );
    let read = assert_ok(get(&app, &at, Some(key)).await, 200).await;
    assert_eq!(read["id"], channel["id"]);

    let tenant_keys = format!("/api/v1/tenants/{tenant_id}/keys");
    for (keys_path, caller) in [("/api/v1/tenant/keys", key), (&*tenant_keys, OPERATOR_KEY)] {
        let resp = post(&app, keys_path, Some(caller), &json!({ "name": "ci" })).await;
        let at = location(&resp);
        let created = assert_ok(resp, 201).await;
        let key_id = created["id"].as_str().unwrap();
        assert_eq!(at, format!("{keys_path}/{key_id}"));
        let revoked = send(
            app.http
                .delete(format!("{}{at}", app.api))
                .bearer_auth(caller),
        )
        .await;
        assert_eq!(revoked.status().as_u16(), 204, "DELETE {at}");
    }
    app.stop().await;
}
