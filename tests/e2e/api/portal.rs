//! Portal sessions: opened by the operator or the tenant, scoped (`manage`, `read`),
//! expiring (default 1 h, at most 24 h), revocable; the token is a tenant credential on the
//! portal's routes only, audited as `portal:<session id>`, and never stored or audited in clear.

use super::count;
use breakwater_e2e::{TestApp, OPERATOR_KEY};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

/// Asserts a problem+json answer with `status`; returns its body.
fn problem(got: (u16, Value, String), status: u16, what: &str) -> Value {
    assert_eq!(got.0, status, "{what}: {}", got.1);
    assert!(
        got.2.starts_with("application/problem+json"),
        "{what}: content type {}",
        got.2
    );
    assert_eq!(got.1["status"], json!(status), "{what}: {}", got.1);
    got.1
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn sessions_open_with_a_scope_a_lifetime_and_a_token_shown_once(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;

    // The tenant opens its own, with its key: 201, the token in the URL's fragment.
    let before = chrono::Utc::now();
    let (s, v, _) = app
        .call(
            "POST",
            "/api/v1/tenant/portal-sessions",
            &key,
            Some(json!({ "scope": "read" })),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let id: Uuid = v["id"].as_str().unwrap().parse().unwrap();
    assert_eq!(v["tenant_id"], json!(tenant));
    assert_eq!(v["scope"], "read");
    let url = v["url"].as_str().unwrap();
    let token = url.strip_prefix("/portal#token=").expect(url);
    assert!(
        token.starts_with("bwp_") && token.len() >= 4 + 22,
        "{token}"
    );
    // Default lifetime: one hour.
    let expires: chrono::DateTime<chrono::Utc> = v["expires_at"].as_str().unwrap().parse().unwrap();
    let ttl = (expires - before).num_seconds();
    assert!((3590..=3610).contains(&ttl), "{ttl}");

    // Only the digest is stored; neither the audit log nor the table holds the token.
    let (scope, created_by, hash): (String, String, Vec<u8>) =
        sqlx::query_as("SELECT scope, created_by, token_hash FROM portal_sessions WHERE id = $1")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(scope, "read");
    assert!(created_by.starts_with("tenant:"), "{created_by}");
    assert_eq!(hash.len(), 32);
    let everything: String =
        sqlx::query_scalar("SELECT string_agg(to_jsonb(a)::text, ' ') FROM audit_log a")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(!everything.contains(token), "the token is in the audit log");
    let audited: Value =
        sqlx::query_scalar("SELECT details FROM audit_log WHERE action = 'portal_session.created'")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(audited["session_id"], json!(id));
    assert_eq!(audited["scope"], "read");

    // The operator opens one for the tenant, with a lifetime; 24 h is the most.
    let (s, v, _) = app
        .call(
            "POST",
            &format!("/api/v1/tenants/{tenant}/portal-sessions"),
            OPERATOR_KEY,
            Some(json!({ "scope": "manage", "ttl_s": 86_400 })),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["scope"], "manage");
    for (body, field) in [
        (json!({ "scope": "manage", "ttl_s": 86_401 }), "ttl_s"),
        (json!({ "scope": "manage", "ttl_s": 0 }), "ttl_s"),
        (json!({ "scope": "admin" }), "scope"),
        (json!({}), "scope"),
    ] {
        let got = app
            .call(
                "POST",
                &format!("/api/v1/tenants/{tenant}/portal-sessions"),
                OPERATOR_KEY,
                Some(body.clone()),
            )
            .await;
        let p = problem(got, 422, &body.to_string());
        assert!(p["detail"].as_str().unwrap().contains(field), "{body}: {p}");
    }
    // A missing tenant is 404.
    problem(
        app.call(
            "POST",
            &format!("/api/v1/tenants/{}/portal-sessions", Uuid::now_v7()),
            OPERATOR_KEY,
            Some(json!({ "scope": "read" })),
        )
        .await,
        404,
        "missing tenant",
    );
    assert_eq!(count(&app.pool, "portal_sessions").await, 2);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_session_acts_for_its_tenant_within_its_scope(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let (manage_id, manage) = app.portal_session(tenant, "manage").await;
    let (_, read) = app.portal_session(tenant, "read").await;

    // A manage session creates, edits, pauses and deletes a channel, audited as the session.
    let (s, v, _) = app
        .call(
            "POST",
            "/api/v1/channels",
            &manage,
            Some(json!({ "url": app.receiver.url("portal"), "name": "from-portal" })),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let channel = v["id"].as_str().unwrap().to_string();
    let (s, v, _) = app
        .call(
            "PATCH",
            &format!("/api/v1/channels/{channel}"),
            &manage,
            Some(json!({ "rate_limit": "10/s" })),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v, _) = app
        .call(
            "POST",
            &format!("/api/v1/channels/{channel}/pause"),
            &manage,
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let actors: Vec<(String, String)> = sqlx::query_as(
        "SELECT DISTINCT actor, action FROM audit_log WHERE channel_id = $1::uuid ORDER BY action",
    )
    .bind(&channel)
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert!(!actors.is_empty());
    for (actor, action) in &actors {
        assert_eq!(actor, &format!("portal:{manage_id}"), "{action}");
    }

    // A read session reads, and every write is 403.
    let (s, v, _) = app
        .call("GET", &format!("/api/v1/channels/{channel}"), &read, None)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["name"], "from-portal");
    let (s, _, _) = app.call("GET", "/api/v1/tenant", &read, None).await;
    assert_eq!(s, 200);
    // It reads the event-type catalog and tries a channel's filter (a POST that only reads),
    // but cannot change the catalog, which is the platform's, with either scope.
    let (s, v) = app
        .post(
            "/api/v1/event-types",
            &key,
            &json!({ "name": "invoice.paid", "example": { "amount": 1 } }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (s, v, _) = app.call("GET", "/api/v1/event-types", &read, None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"][0]["name"], "invoice.paid", "{v}");
    let (s, v, _) = app
        .call(
            "POST",
            &format!("/api/v1/channels/{channel}/filter/test"),
            &read,
            Some(json!({ "payload": { "amount": 1 }, "event_type": "invoice.paid" })),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["matches"], true, "{v}");
    for session in [&manage, &read] {
        let (s, v, _) = app
            .call(
                "POST",
                "/api/v1/event-types",
                session,
                Some(json!({ "name": "from.portal" })),
            )
            .await;
        assert_eq!(s, 403, "{v}");
    }
    for (method, path, body) in [
        (
            "POST",
            "/api/v1/channels".to_string(),
            Some(json!({ "url": app.receiver.url("x") })),
        ),
        (
            "PATCH",
            format!("/api/v1/channels/{channel}"),
            Some(json!({ "name": "nope" })),
        ),
        ("DELETE", format!("/api/v1/channels/{channel}"), None),
        ("POST", format!("/api/v1/channels/{channel}/resume"), None),
        (
            "POST",
            format!("/api/v1/channels/{channel}/secret/rotate"),
            None,
        ),
        ("POST", format!("/api/v1/channels/{channel}/replay"), None),
        (
            "POST",
            format!("/api/v1/channels/{channel}/deliveries"),
            Some(json!({ "event_type": "a.b", "payload": {} })),
        ),
        (
            "POST",
            "/api/v1/messages".to_string(),
            Some(json!({ "event_type": "a.b", "payload": {} })),
        ),
    ] {
        let p = problem(
            app.call(method, &path, &read, body).await,
            403,
            &format!("read session {method} {path}"),
        );
        assert!(p["detail"].as_str().unwrap().contains("read scope"), "{p}");
    }
    let (s, v, _) = app
        .call("GET", &format!("/api/v1/channels/{channel}"), &key, None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["name"], "from-portal", "a read session changed nothing");
    assert_eq!(v["circuit_state"], "paused");

    // No session mints keys or sessions, changes the tenant, or reaches operator routes.
    for token in [&manage, &read] {
        for (method, path, body) in [
            ("POST", "/api/v1/tenant/keys".to_string(), Some(json!({}))),
            ("GET", "/api/v1/tenant/keys".to_string(), None),
            (
                "POST",
                "/api/v1/tenant/portal-sessions".to_string(),
                Some(json!({ "scope": "manage" })),
            ),
            ("POST", "/api/v1/tenant/alert-secret".to_string(), None),
            (
                "PATCH",
                "/api/v1/tenant".to_string(),
                Some(json!({ "name": "x" })),
            ),
        ] {
            problem(
                app.call(method, &path, token, body).await,
                403,
                &format!("session {method} {path}"),
            );
        }
        for (method, path) in [
            ("GET", "/api/v1/admin/channels".to_string()),
            ("GET", "/api/v1/tenants".to_string()),
            ("POST", format!("/api/v1/tenants/{tenant}/portal-sessions")),
            ("GET", format!("/api/v1/tenants/{tenant}/keys")),
        ] {
            let (s, v, _) = app
                .call(method, &path, token, Some(json!({ "scope": "manage" })))
                .await;
            assert!(s == 401 || s == 403, "session {method} {path}: {s} {v}");
        }
    }
    assert_eq!(count(&app.pool, "api_keys").await, 1, "no key was minted");
    assert_eq!(count(&app.pool, "portal_sessions").await, 2);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn an_expired_or_revoked_session_is_refused(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let (expired_id, expired) = app.portal_session(tenant, "manage").await;
    let (by_tenant_id, by_tenant) = app.portal_session(tenant, "manage").await;
    let (by_operator_id, by_operator) = app.portal_session(tenant, "read").await;
    for token in [&expired, &by_tenant, &by_operator] {
        let (s, _, _) = app.call("GET", "/api/v1/channels", token, None).await;
        assert_eq!(s, 200);
    }

    // Expiry: the session ends at `expires_at`.
    sqlx::query(
        "UPDATE portal_sessions SET created_at = now() - interval '2 hours', expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(expired_id)
    .execute(&app.pool)
    .await
    .unwrap();
    let p = problem(
        app.call("GET", "/api/v1/channels", &expired, None).await,
        401,
        "expired",
    );
    assert_eq!(p["code"], "unauthorized");
    assert_eq!(
        p["detail"], "unknown, expired or revoked portal session",
        "a portal token is not called an API key: {p}"
    );

    // The tenant revokes one with its key, the operator another.
    let (s, _, _) = app
        .delete(
            &format!("/api/v1/tenant/portal-sessions/{by_tenant_id}"),
            &key,
        )
        .await;
    assert_eq!(s, 204);
    problem(
        app.call("GET", "/api/v1/channels", &by_tenant, None).await,
        401,
        "revoked by the tenant",
    );
    // Again: 404, and a session cannot revoke itself or another (its key is needed).
    problem(
        app.delete(
            &format!("/api/v1/tenant/portal-sessions/{by_tenant_id}"),
            &key,
        )
        .await,
        404,
        "revoked twice",
    );
    problem(
        app.delete(
            &format!("/api/v1/tenant/portal-sessions/{by_operator_id}"),
            &by_operator,
        )
        .await,
        403,
        "a session revoking",
    );
    let (s, _, _) = app
        .delete(
            &format!("/api/v1/tenants/{tenant}/portal-sessions/{by_operator_id}"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 204);
    problem(
        app.call("GET", "/api/v1/channels", &by_operator, None)
            .await,
        401,
        "revoked by the operator",
    );

    // Both revocations audited, by who revoked, without the token.
    let rows: Vec<(String, Value)> = sqlx::query_as(
        "SELECT actor, details FROM audit_log WHERE action = 'portal_session.revoked' ORDER BY id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows[0].0.starts_with("tenant:"));
    assert_eq!(rows[0].1["session_id"], json!(by_tenant_id));
    assert_eq!(rows[1].0, "operator");
    assert_eq!(rows[1].1["session_id"], json!(by_operator_id));
    let everything: String =
        sqlx::query_scalar("SELECT string_agg(to_jsonb(a)::text, ' ') FROM audit_log a")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    for token in [&expired, &by_tenant, &by_operator] {
        assert!(!everything.contains(token.as_str()));
    }

    // A deleted tenant's sessions end with it.
    let (_, live) = app.portal_session(tenant, "read").await;
    let (s, _, _) = app
        .delete(&format!("/api/v1/tenants/{tenant}"), OPERATOR_KEY)
        .await;
    assert!(s == 200 || s == 204, "{s}");
    problem(
        app.call("GET", "/api/v1/channels", &live, None).await,
        401,
        "deleted tenant",
    );
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_portal_page_is_framable_as_configured_and_sends_no_referrer(pool: PgPool) {
    let app = TestApp::spawn_with(pool, |s| {
        s.api.portal_frame_ancestors = "'self' https://dashboard.example.com".into();
        s.api.public_url = "https://hooks.example.com/".into();
    })
    .await;
    let (tenant, _) = app.tenant("acme", "default").await;
    for path in ["/portal", "/portal/portal.js", "/portal/portal.css"] {
        let r = app
            .http
            .get(format!("{}{path}", app.api))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("frame-ancestors 'self' https://dashboard.example.com"),
            "{csp}"
        );
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert_eq!(h["referrer-policy"], "no-referrer");
        assert!(
            h.get("x-frame-options").is_none(),
            "X-Frame-Options would forbid framing"
        );
    }
    // The session's URL is on the public base.
    let (s, v) = app
        .post(
            &format!("/api/v1/tenants/{tenant}/portal-sessions"),
            OPERATOR_KEY,
            &json!({ "scope": "read" }),
        )
        .await;
    assert_eq!(s, 201);
    assert!(
        v["url"]
            .as_str()
            .unwrap()
            .starts_with("https://hooks.example.com/portal#token=bwp_"),
        "{v}"
    );
    app.stop().await;
}

/// The portal's delivery filters: by event type and by when a delivery was accepted (`since`
/// inclusive, `until` exclusive), beside `status`; a bad value is a 422 naming the field.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn the_delivery_list_filters_by_event_type_and_time(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant, key) = app.tenant("acme", "default").await;
    let channel = app.channel(&key, "filters").await;
    let (_, token) = app.portal_session(tenant, "read").await;
    let mut ids = Vec::new();
    for event_type in ["invoice.paid", "invoice.failed", "invoice.paid"] {
        let (s, v) = app
            .post(
                &format!("/api/v1/channels/{channel}/deliveries"),
                &key,
                &json!({ "event_type": event_type, "payload": {} }),
            )
            .await;
        assert_eq!(s, 202, "{v}");
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    // Spread their acceptance times: an hour apart, oldest first.
    for (i, id) in ids.iter().enumerate() {
        sqlx::query("UPDATE deliveries SET created_at = $2 WHERE id = $1::uuid")
            .bind(id)
            .bind(
                chrono::DateTime::parse_from_rfc3339("2026-01-01T10:00:00Z").unwrap()
                    + chrono::Duration::hours(i as i64),
            )
            .execute(&app.pool)
            .await
            .unwrap();
    }
    let listed = |query: String| {
        let app = &app;
        let token = token.clone();
        async move {
            let (s, v, _) = app
                .call(
                    "GET",
                    &format!("/api/v1/channels/{channel}/deliveries?{query}"),
                    &token,
                    None,
                )
                .await;
            assert_eq!(s, 200, "{query}: {v}");
            v["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["id"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        listed("event_type=invoice.paid".into()).await,
        [ids[2].clone(), ids[0].clone()]
    );
    assert_eq!(
        listed("since=2026-01-01T11:00:00Z".into()).await,
        [ids[2].clone(), ids[1].clone()]
    );
    assert_eq!(
        listed("since=2026-01-01T10:00:00Z&until=2026-01-01T12:00:00Z".into()).await,
        [ids[1].clone(), ids[0].clone()]
    );
    assert_eq!(
        listed("event_type=invoice.paid&until=2026-01-01T12:00:00%2B01:00".into()).await,
        [ids[0].clone()]
    );
    for (query, field) in [
        ("since=yesterday", "since"),
        ("until=2026-13-01T00:00:00Z", "until"),
        ("event_type=", "event_type"),
        ("event_type=a%20b", "event_type"),
    ] {
        let p = problem(
            app.call(
                "GET",
                &format!("/api/v1/channels/{channel}/deliveries?{query}"),
                &token,
                None,
            )
            .await,
            422,
            query,
        );
        assert!(
            p["detail"].as_str().unwrap().starts_with(field),
            "{query}: {p}"
        );
    }
    app.stop().await;
}
