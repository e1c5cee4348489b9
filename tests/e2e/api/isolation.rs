//! Tenant isolation: another tenant's channel or delivery is 404 and stays unchanged.

use super::{channel_row, count, enqueue_path, event};
use breakwater_e2e::http::{assert_invalid, assert_ok, assert_problem, get, post, send};
use breakwater_e2e::TestApp;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

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
    // B cannot try A's payload filter (nor learn whether it has one), nor set one on it.
    let filter_test = |id: Uuid| format!("/api/v1/channels/{id}/filter/test");
    let sample = json!({ "event_type": "x.y", "payload": { "n": 1 } });
    let missing_filter = assert_problem(
        post(&app, &filter_test(Uuid::now_v7()), Some(&key_b), &sample).await,
        404,
    )
    .await;
    let foreign_filter = assert_problem(
        post(&app, &filter_test(channel_a), Some(&key_b), &sample).await,
        404,
    )
    .await;
    assert_eq!(foreign_filter, missing_filter);
    let (s, _) = app
        .patch_channel(&key_b, channel_a, json!({ "filter": { "==": [1, 1] } }))
        .await;
    assert_eq!(s, 404);
    // B cannot read A's breaker explanation (nor learn A's settings), nor set A's retry policy.
    let explain = |id: Uuid| format!("/api/v1/channels/{id}/circuit/explain");
    let missing_explain =
        assert_problem(get(&app, &explain(Uuid::now_v7()), Some(&key_b)).await, 404).await;
    let foreign_explain =
        assert_problem(get(&app, &explain(channel_a), Some(&key_b)).await, 404).await;
    assert_eq!(foreign_explain, missing_explain);
    let (s, _) = app
        .patch_channel(
            &key_b,
            channel_a,
            json!({ "retry_policy": { "max_attempts": 1 } }),
        )
        .await;
    assert_eq!(s, 404);
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

    // B can neither resend A's delivery nor recover A's channel (404 like a missing one), and
    // B's search finds none of A's deliveries, even naming A's channel.
    app.wait_delivery(delivery, "delivered", std::time::Duration::from_secs(10))
        .await;
    let resend = |id: Uuid| format!("/api/v1/deliveries/{id}/resend");
    let missing = assert_problem(
        post(&app, &resend(Uuid::now_v7()), Some(&key_b), &json!({})).await,
        404,
    )
    .await;
    let foreign = assert_problem(
        post(&app, &resend(delivery), Some(&key_b), &json!({})).await,
        404,
    )
    .await;
    assert_eq!(foreign, missing);
    let recover = json!({ "since": "2020-01-01T00:00:00Z", "status": ["delivered"] });
    for body in [
        recover.clone(),
        json!({ "since": "2020-01-01T00:00:00Z", "dry_run": true }),
    ] {
        assert_problem(
            post(
                &app,
                &format!("/api/v1/channels/{channel_a}/recover"),
                Some(&key_b),
                &body,
            )
            .await,
            404,
        )
        .await;
    }
    for query in [String::new(), format!("?channel_id={channel_a}")] {
        let page = assert_ok(
            get(&app, &format!("/api/v1/deliveries{query}"), Some(&key_b)).await,
            200,
        )
        .await;
        assert_eq!(page["data"], json!([]), "{page}");
    }
    assert_eq!(app.delivery_status(delivery).await, "delivered");
    assert_eq!(app.receiver.count("a"), 1, "nothing was sent again");

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

/// Every call the portal makes, with a portal session of tenant A on tenant B's objects: each is
/// 404 (exactly like a missing object) or 403 (a route sessions never reach), and B's objects
/// are unchanged. Sessions of both scopes.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_portal_session_never_reaches_another_tenants_objects(pool: PgPool) {
    use breakwater_e2e::OPERATOR_KEY;
    let app = TestApp::spawn(pool).await;
    let (tenant_a, _) = app.tenant("a", "default").await;
    let (tenant_b, key_b) = app.tenant("b", "default").await;
    let channel_b = app.channel(&key_b, "b").await;
    let delivery_b = app
        .deliver(&key_b, channel_b, json!({ "secret": "B's data" }))
        .await;
    let (_, message_b) = app
        .post(
            "/api/v1/messages",
            &key_b,
            &json!({ "event_type": "x.y", "payload": { "secret": "B's data" } }),
        )
        .await;
    let message_b = message_b["id"].as_str().unwrap().to_string();
    let (session_b, _) = app.portal_session(tenant_b, "read").await;
    let (s, v) = app
        .post(
            "/api/v1/event-types",
            &key_b,
            &json!({ "name": "b.secret", "description": "B's own" }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    app.wait_settled(channel_b).await;
    let before = channel_row(&app.pool, channel_b).await;
    let deliveries_before = count(&app.pool, "deliveries").await;

    let c = format!("/api/v1/channels/{channel_b}");
    let d = format!("/api/v1/deliveries/{delivery_b}");
    let calls: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", c.clone(), None),
        ("PATCH", c.clone(), Some(json!({ "name": "taken" }))),
        ("POST", format!("{c}/pause"), None),
        ("POST", format!("{c}/resume"), None),
        ("POST", format!("{c}/replay"), None),
        ("POST", format!("{c}/secret/rotate"), None),
        ("GET", format!("{c}/deliveries"), None),
        (
            "GET",
            format!("{c}/deliveries?status=delivered&event_type=test.event"),
            None,
        ),
        ("POST", format!("{c}/deliveries"), Some(event("x.y"))),
        (
            "POST",
            format!("{c}/deliveries/batch"),
            Some(json!({ "deliveries": [event("x.y")] })),
        ),
        ("GET", d.clone(), None),
        ("POST", format!("{d}/replay"), None),
        ("POST", format!("{d}/resend"), None),
        (
            "POST",
            format!("{c}/recover"),
            Some(json!({ "since": "2020-01-01T00:00:00Z", "status": ["delivered"] })),
        ),
        ("POST", format!("{d}/cancel"), None),
        ("DELETE", format!("{d}/payload"), None),
        ("GET", format!("/api/v1/messages/{message_b}"), None),
        (
            "POST",
            "/api/v1/messages".into(),
            Some(json!({ "event_type": "x.y", "payload": {}, "channels": [channel_b] })),
        ),
        (
            "DELETE",
            format!("/api/v1/tenant/portal-sessions/{session_b}"),
            None,
        ),
        (
            "POST",
            format!("{c}/filter/test"),
            Some(json!({ "payload": { "secret": "B's data" } })),
        ),
        ("GET", "/api/v1/event-types/b.secret".into(), None),
        ("DELETE", c.clone(), None),
    ];
    for scope in ["manage", "read"] {
        let (_, token) = app.portal_session(tenant_a, scope).await;
        for (method, path, body) in &calls {
            let (s, v, ct) = app.call(method, path, &token, body.clone()).await;
            assert!(
                s == 404 || s == 403 || (s == 422 && path == "/api/v1/messages"),
                "{scope} session of A: {method} {path}: {s} {v}"
            );
            assert!(
                ct.starts_with("application/problem+json"),
                "{method} {path}: {ct}"
            );
            assert!(!v.to_string().contains("B's data"), "{method} {path}: {v}");
        }
        // A session of A sees none of B's channels in its list.
        let (s, v, _) = app.call("GET", "/api/v1/channels", &token, None).await;
        assert_eq!(s, 200);
        assert_eq!(v["data"], json!([]), "{v}");
        // Nor any of B's deliveries in a search, even naming B's channel or message.
        for query in [
            String::new(),
            format!("?channel_id={channel_b}"),
            format!("?message_id={message_b}"),
        ] {
            let (s, v, _) = app
                .call("GET", &format!("/api/v1/deliveries{query}"), &token, None)
                .await;
            assert_eq!(s, 200, "{v}");
            assert_eq!(v["data"], json!([]), "{scope} search {query}: {v}");
        }
    }
    // The operator's revocation names the tenant: B's session under A's id is 404.
    let (s, _, _) = app
        .delete(
            &format!("/api/v1/tenants/{tenant_a}/portal-sessions/{session_b}"),
            OPERATOR_KEY,
        )
        .await;
    assert_eq!(s, 404);

    assert_eq!(channel_row(&app.pool, channel_b).await, before);
    assert_eq!(count(&app.pool, "deliveries").await, deliveries_before);
    let revoked: i64 =
        sqlx::query_scalar("SELECT count(*) FROM portal_sessions WHERE revoked_at IS NOT NULL")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(revoked, 0);
    app.stop().await;
}

#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn other_tenants_headers_and_auth_are_neither_read_nor_changed(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key_a) = app.tenant("a", "default").await;
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_a = app
        .channel_with(
            &key_a,
            "a",
            json!({
                "headers": { "X-Api-Key": { "value": "a-secret", "sensitive": true } },
                "auth": { "type": "basic", "username": "a-user", "password": "a-pass" },
            }),
        )
        .await;
    let before = channel_row(&app.pool, channel_a).await;
    let path = format!("/api/v1/channels/{channel_a}");
    // B reads nothing of it: 404, no header name, no user name.
    let foreign = assert_problem(get(&app, &path, Some(&key_b)).await, 404).await;
    let text = foreign.to_string();
    assert!(
        !text.contains("X-Api-Key") && !text.contains("a-user"),
        "{text}"
    );
    let list = assert_ok(get(&app, "/api/v1/channels", Some(&key_b)).await, 200).await;
    assert_eq!(list["data"], json!([]));
    // B's PATCH of them is 404 and changes nothing (nor does one that only keeps the secret).
    for body in [
        json!({ "headers": { "X-Api-Key": "b-value" } }),
        json!({ "headers": { "X-Api-Key": { "sensitive": true } } }),
        json!({ "auth": { "type": "basic", "username": "b-user" } }),
        json!({ "auth": null, "headers": null }),
    ] {
        let resp = send(
            app.http
                .patch(format!("{}{path}", app.api))
                .bearer_auth(&key_b)
                .json(&body),
        )
        .await;
        assert_problem(resp, 404).await;
    }
    assert_eq!(channel_row(&app.pool, channel_a).await, before);
    // A still reads its own, masked.
    let own = assert_ok(get(&app, &path, Some(&key_a)).await, 200).await;
    assert_eq!(own["auth"]["username"], "a-user");
    assert_eq!(own["auth"]["password"], "********");
}
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn other_tenants_event_type_is_404_and_unchanged(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant_a, key_a) = app.tenant("a", "default").await;
    let (_, key_b) = app.tenant("b", "default").await;
    let schema = json!({"type": "object", "required": ["n"]});
    let (s, v) = app
        .post(
            "/api/v1/event-types",
            &key_a,
            &json!({ "name": "invoice.paid", "schema": schema, "description": "A's" }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let row = |pool: PgPool| async move {
        sqlx::query_scalar::<_, Value>("SELECT to_jsonb(e) FROM event_types e")
            .fetch_all(&pool)
            .await
            .unwrap()
    };
    let before = row(app.pool.clone()).await;

    // B reads, patches and deletes A's type exactly as a missing one: 404, nothing changes.
    let missing = assert_problem(
        get(&app, "/api/v1/event-types/nothing.here", Some(&key_b)).await,
        404,
    )
    .await;
    let foreign = assert_problem(
        get(&app, "/api/v1/event-types/invoice.paid", Some(&key_b)).await,
        404,
    )
    .await;
    assert_eq!(foreign["detail"], missing["detail"]);
    let (s, _) = app
        .patch(
            "/api/v1/event-types/invoice.paid",
            &key_b,
            &json!({ "description": "B's now" }),
        )
        .await;
    assert_eq!(s, 404);
    let (s, _, _) = app.delete("/api/v1/event-types/invoice.paid", &key_b).await;
    assert_eq!(s, 404);
    // B's list is empty; B may register the same name for itself, A's is untouched.
    let list = assert_ok(get(&app, "/api/v1/event-types", Some(&key_b)).await, 200).await;
    assert_eq!(list["data"], json!([]));
    assert_eq!(row(app.pool.clone()).await, before);
    let (s, v) = app
        .post(
            "/api/v1/event-types",
            &key_b,
            &json!({ "name": "invoice.paid" }),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    // A's schema does not apply to B's enqueues (B's type has none).
    let channel_b = app.channel(&key_b, "b").await;
    assert_ok(
        post(
            &app,
            &enqueue_path(channel_b),
            Some(&key_b),
            &json!({ "event_type": "invoice.paid", "payload": {} }),
        )
        .await,
        202,
    )
    .await;
    let channel_a = app.channel(&key_a, "a").await;
    assert_problem(
        post(
            &app,
            &enqueue_path(channel_a),
            Some(&key_a),
            &json!({ "event_type": "invoice.paid", "payload": {} }),
        )
        .await,
        422,
    )
    .await;
    // B's key cannot reach the operator's view of A's catalog.
    assert_problem(
        get(
            &app,
            &format!("/api/v1/tenants/{tenant_a}/event-types"),
            Some(&key_b),
        )
        .await,
        403,
    )
    .await;
    app.stop().await;
}

/// A tenant's API key revokes only its own portal sessions: another tenant's session id is a
/// 404 exactly like a missing one, and that session keeps working until its own tenant revokes
/// it. (A session id travels in `Location` headers and audit rows, so it is not a secret; the
/// key must be what limits who revokes.)
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_tenant_key_cannot_revoke_another_tenants_portal_session(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (tenant_a, key_a) = app.tenant("a", "default").await;
    let (tenant_b, key_b) = app.tenant("b", "default").await;
    let (session_b, token_b) = app.portal_session(tenant_b, "manage").await;
    let revoke = |id: Uuid| format!("/api/v1/tenant/portal-sessions/{id}");
    let session_works = |token: String| {
        let app = &app;
        async move {
            let (s, v, _) = app
                .call("GET", "/api/v1/portal/session", &token, None)
                .await;
            (s, v)
        }
    };
    let (s, v) = session_works(token_b.clone()).await;
    assert_eq!((s, &v["id"]), (200, &json!(session_b)), "{v}");

    let (s, missing, ct) = app.delete(&revoke(Uuid::now_v7()), &key_a).await;
    assert_eq!(
        (s, ct.as_str()),
        (404, "application/problem+json"),
        "{missing}"
    );
    let (s, foreign, ct) = app.delete(&revoke(session_b), &key_a).await;
    assert_eq!(
        (s, ct.as_str()),
        (404, "application/problem+json"),
        "{foreign}"
    );
    assert_eq!(
        foreign, missing,
        "another tenant's session must look missing"
    );

    // B's session still answers, as B's, and still reaches B's objects.
    let (s, v) = session_works(token_b.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["id"], json!(session_b));
    assert_eq!(v["tenant_id"], json!(tenant_b), "{v}");
    let channel_b = app.channel(&key_b, "b").await;
    let (s, v, _) = app
        .call(
            "GET",
            &format!("/api/v1/channels/{channel_b}"),
            &token_b,
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let revoked: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM portal_sessions WHERE id = $1 AND revoked_at IS NOT NULL",
    )
    .bind(session_b)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(revoked, 0);
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE action = 'portal_session.revoked'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(audited, 0, "a refused revocation audits nothing");

    // The same key does revoke A's own session, and B's key B's: the 404 above was the tenant
    // boundary, not a route that refuses everything.
    let (session_a, token_a) = app.portal_session(tenant_a, "read").await;
    let (s, v, _) = app.delete(&revoke(session_a), &key_a).await;
    assert_eq!(s, 204, "{v}");
    assert_eq!(session_works(token_a).await.0, 401);
    let (s, v, _) = app.delete(&revoke(session_b), &key_b).await;
    assert_eq!(s, 204, "{v}");
    assert_eq!(session_works(token_b).await.0, 401);
    app.stop().await;
}

/// The tenant-wide search with one tenant's key, naming another tenant's channel (alone or with
/// other filters), answers 200 with an empty page: a search names no object, so it neither
/// 404s nor shows a row. Both tenants have deliveries, so an empty answer is the tenant
/// boundary, not an empty table; the owner's same search finds them.
#[sqlx::test(migrator = "breakwater_core::MIGRATOR")]
async fn a_tenant_wide_search_naming_another_tenants_channel_finds_nothing(pool: PgPool) {
    let app = TestApp::spawn(pool).await;
    let (_, key_a) = app.tenant("a", "default").await;
    let (_, key_b) = app.tenant("b", "default").await;
    let channel_a = app.channel(&key_a, "a").await;
    let channel_b = app.channel(&key_b, "b").await;
    let own_a = app.deliver(&key_a, channel_a, json!({ "n": 1 })).await;
    let mut of_b = Vec::new();
    for i in 0..3 {
        of_b.push(
            app.deliver(
                &key_b,
                channel_b,
                json!({ "secret": format!("B's data {i}") }),
            )
            .await,
        );
    }
    app.wait_deliveries(
        channel_b,
        "delivered",
        3,
        std::time::Duration::from_secs(10),
    )
    .await;
    app.wait_delivery(own_a, "delivered", std::time::Duration::from_secs(10))
        .await;
    let search = |query: String, key: String| {
        let app = &app;
        async move {
            assert_ok(
                get(app, &format!("/api/v1/deliveries{query}"), Some(&key)).await,
                200,
            )
            .await
        }
    };
    let ids = |page: &Value| -> Vec<Uuid> {
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().parse().unwrap())
            .collect()
    };

    for query in [
        format!("?channel_id={channel_b}"),
        format!("?channel_id={channel_b}&status=delivered"),
        format!("?channel_id={channel_b}&event_type=test.event"),
        format!("?channel_id={channel_b}&since=2020-01-01T00:00:00Z"),
        format!("?channel_id={channel_b}&limit=1"),
    ] {
        let page = search(query.clone(), key_a.clone()).await;
        assert_eq!(page["data"], json!([]), "A's search {query}: {page}");
        assert_eq!(page["next_cursor"], Value::Null, "{query}: {page}");
        assert!(!page.to_string().contains("B's data"));
    }
    // A's own search, unfiltered or by a filter B's rows also match, holds only A's delivery.
    for query in [
        String::new(),
        "?status=delivered&event_type=test.event".into(),
    ] {
        let page = search(query.clone(), key_a.clone()).await;
        assert_eq!(ids(&page), [own_a], "A's search {query}: {page}");
    }
    // B's same search finds B's deliveries: the filter matches for their owner.
    let page = search(format!("?channel_id={channel_b}"), key_b.clone()).await;
    let mut newest_first = of_b.clone();
    newest_first.reverse();
    assert_eq!(ids(&page), newest_first, "{page}");
    app.stop().await;
}
